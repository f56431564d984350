"""Gates: declared in `gates/<stage>/*.yaml`, run by small registered checks.

`files` reads and validates gate files (and exports their JSON Schema), `registry` holds the
checks (probes that talk to the server, judges that read a stage's data), `runner` runs them,
`thresholds` is what the house policy lets judges compare against.
"""

from qualify.gates.files import GateFile, LoadedGate, Params, gate_file_schema, load_gates
from qualify.gates.registry import CHECKS, CheckSpec, Judged, Outcome, check, judge, load_checks
from qualify.gates.runner import judge_gates, judge_stage, run_gate
from qualify.gates.thresholds import Thresholds
from qualify.preflight.probe import GateContext

__all__ = [
    "CHECKS",
    "CheckSpec",
    "GateContext",
    "GateFile",
    "Judged",
    "LoadedGate",
    "Outcome",
    "Params",
    "Thresholds",
    "check",
    "gate_file_schema",
    "judge",
    "judge_gates",
    "judge_stage",
    "load_checks",
    "load_gates",
    "run_gate",
]
