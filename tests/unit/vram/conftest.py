"""Lets the GPU tests import their recording helpers (gpu_fakes, gpu_recorded) by module name."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
