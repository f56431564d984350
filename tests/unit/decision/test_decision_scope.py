"""The evidence scope on the first screen and the comparability caveat, read back from the
gates and stage outcomes they are made of: the published vLLM attach decision blamed the change
for think-level preflight gates its control never ran, and said nowhere which levels each lane
covered."""

from __future__ import annotations

from qualify.decision.caveats import _comparability
from qualify.decision.headline import scope
from qualify.present.record import (
    DecisionRecord,
    Evaluation,
    GateOutcome,
    GateVerdict,
    StageOutcome,
)
from qualify.records import Verdict
from qualify.registry import stage_names


def _gate(stage: str, gate: str, level: str | None) -> GateOutcome:
    return GateOutcome(
        key=f"{stage}/{gate}" + (f"@{level}" if level else ""),
        stage=stage,
        gate=gate + (f"@{level}" if level else ""),
        level=level,
        verdict=Verdict.FAIL,
        required=True,
        critical=False,
        status="blocks",
        authoritative=GateVerdict(attempt=1, verdict=Verdict.FAIL),
    )


GATES = [
    _gate("preflight", "smoke", "off"),
    _gate("preflight", "smoke", "think"),
    _gate("preflight", "json", "think"),
    _gate("quality", "recall-build", "think"),
    _gate("quality", "control-preflight-smoke", "off"),
    _gate("ab", "decode", None),
]


def _stages(ran: set[str]) -> dict[str, StageOutcome]:
    why = "not listed in stages.run"
    return {
        n: StageOutcome(stage=n, planned=n in ran, ran=n in ran, why_not=None if n in ran else why)
        for n in stage_names()
    }


def _record() -> DecisionRecord:
    return DecisionRecord.model_construct(evaluation=Evaluation.model_construct(gates=GATES))


def test_the_scope_names_each_lanes_levels_and_what_did_not_run() -> None:
    line = scope(_record(), _stages({"identity", "preflight", "quality", "ab"}))
    assert line.startswith("Evidence: identity, preflight (off, think; the control at off), ")
    assert "quality, ab; not run: context, capacity, vram (not listed in stages.run)." in line
    assert scope(_record(), _stages(set(stage_names()))).endswith("; every stage ran.")


def test_levels_the_control_never_ran_are_a_comparability_caveat() -> None:
    (said,) = _comparability(GATES)
    assert "the control ran preflight at off, the candidate also at think" in said
    assert "its 3 preflight and quality gates there are not compared" in said
    both = [*GATES, _gate("quality", "control-preflight-smoke", "think")]
    assert _comparability(both) == [], "the control ran every level: nothing to caveat"
