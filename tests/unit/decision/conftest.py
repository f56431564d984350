"""Lets the decision tests import their contract-shaped run (decision_contract_run) by name."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
