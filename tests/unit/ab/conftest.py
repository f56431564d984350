"""Lets the A/B tests import the GPU sampler stand-in of the VRAM tests (fake_parts)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1] / "vram"))  # fake_parts
