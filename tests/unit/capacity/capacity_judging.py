"""The capacity judges, fed a record's JSON form (as the stage writes it) read into the typed
record: tests write the data they judge as the JSON a run would hold."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from qualify.capacity import judges
from qualify.capacity.record import Record
from qualify.gates.registry import Judged
from qualify.gates.thresholds import Thresholds

NoParams = judges.NoParams
DegenerateParams = judges.DegenerateParams


def _fed(fn: Callable[[Record, Any, Thresholds], list[Judged]]) -> Callable[..., list[Judged]]:
    def run(data: dict[str, Any], params: Any, thresholds: Thresholds) -> list[Judged]:
        return fn(Record.model_validate(data), params, thresholds)

    return run


expected_range = _fed(judges.expected_range)
unranged = _fed(judges.unranged)
requests = _fed(judges.requests)
measured = _fed(judges.measured)
fidelity = _fed(judges.fidelity)
incumbent = _fed(judges.incumbent)
degenerate_answers = _fed(judges.degenerate_answers)
engine = _fed(judges.engine)
answers = _fed(judges.answers)
goodput_knee = _fed(judges.goodput_knee)
harness = _fed(judges.harness)
soak_gate = _fed(judges.soak_gate)
energy = _fed(judges.energy)
