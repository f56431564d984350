"""The trust tests build on the decision tests' hand-made house and run (house_run)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1] / "decision"))
