"""What a preflight check is handed: `GateContext`, which lives in `qualify.gates.probe`."""

from qualify.gates.probe import GateContext as GateContext
