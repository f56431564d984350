"""Checks: small registered functions that the declarative gate files in `gates/` run."""

from qualify.checks.context import GateContext
from qualify.checks.gatefile import GateFile, LoadedGate, Params, gate_file_schema, load_gates
from qualify.checks.registry import CHECKS, CheckSpec, Outcome, check, load_checks
from qualify.checks.runner import run_gate

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
