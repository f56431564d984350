"""Gates: declared in `gates/<stage>/*.yaml`, run by small registered checks (`files` reads
them, `registry` holds the checks, `probe` is what a probe is handed, `runner` runs them,
`thresholds` is what the house policy lets judges compare against).

The names below are imported on first use, so that importing one module of the package (a
stage's settings importing `thresholds`) does not import the others, nor what they import.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from qualify.gates.files import LoadedGate, load_gates
    from qualify.gates.probe import GateContext
    from qualify.gates.registry import CHECKS, load_checks
    from qualify.gates.runner import run_gate

_HOME = {
    "LoadedGate": "files",
    "load_gates": "files",
    "GateContext": "probe",
    "CHECKS": "registry",
    "load_checks": "registry",
    "run_gate": "runner",
}

__all__ = ["CHECKS", "GateContext", "LoadedGate", "load_checks", "load_gates", "run_gate"]


def __getattr__(name: str) -> object:  # a name re-exported lazily (typed by the imports above)
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'qualify.gates' has no attribute {name!r}")
    return getattr(importlib.import_module(f"qualify.gates.{home}"), name)
