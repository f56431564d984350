"""Checks: small registered functions that the declarative gate files in `gates/` run."""

from qualify.gates.files import GateFile, LoadedGate, Params, gate_file_schema, load_gates
from qualify.gates.registry import CHECKS, CheckSpec, Outcome, check, load_checks
from qualify.gates.runner import run_gate
from qualify.preflight.probe import GateContext

__all__ = [
    "CHECKS",
    "CheckSpec",
    "GateContext",
    "GateFile",
    "LoadedGate",
    "Outcome",
    "Params",
    "check",
    "gate_file_schema",
    "load_checks",
    "load_gates",
    "run_gate",
]
