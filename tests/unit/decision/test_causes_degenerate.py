"""A speed gate with nothing to time because every answer degenerated is the model's cause, not
the harness's: the H200 vLLM runs read "harness error: the harness broke" for cells whose every
answer was one word repeated."""

from __future__ import annotations

from qualify.decision.causes import _family
from qualify.present.record import GateOutcome, GateVerdict
from qualify.records import Verdict


def _gate(gate: str, verdict: Verdict, reason: str, stage: str = "capacity") -> GateOutcome:
    return GateOutcome(
        key=f"{stage}/{gate}",
        stage=stage,
        gate=gate,
        verdict=verdict,
        required=True,
        critical=False,
        status="blocks",
        reasons=[reason],
        authoritative=GateVerdict(attempt=1, verdict=verdict),
    )


def test_no_counted_run_of_degenerate_answers_is_the_models_cause() -> None:
    measured = _gate(
        "measured",
        Verdict.ERROR,
        "256-c1: no counted run (1 degenerate answers (kept as evidence, not a speed))",
    )
    cause = _family(measured, {}, "the change")
    assert cause.family == "degenerate" and cause.tag == "alone"
    assert "degenerate" in cause.title and cause.label == "not compared with the control"
    same = _family(_gate("degenerate", Verdict.FAIL, "stream 1: degenerate: 'Python'"), {}, "x")
    assert same.family == "degenerate", "the degenerate gate and the empty cell are one cause"
    ctx = _family(_gate("degenerate", Verdict.FAIL, "c=1: degenerate", "context"), {}, "x")
    assert ctx.family == "degenerate"


def test_no_counted_run_for_another_reason_stays_a_harness_error() -> None:
    broken = _gate("measured", Verdict.ERROR, "256-c1: no counted run (every stream failed)")
    assert _family(broken, {}, "the change").tag == "harness"


def test_a_control_gate_the_candidate_passed_is_not_blamed_on_the_change() -> None:
    """The SGLang attach decision read "differs from the control ... fix what the change breaks
    (the control passes them)" for `quality/control-preflight-streaming-tools@off`, which the
    control failed and the candidate passed. The control failing alone is the base's."""
    control = _gate("control-preflight-streaming-tools", Verdict.FAIL, "tool book_table", "quality")
    control = control.model_copy(update={"level": "off", "gate": control.gate + "@off"})
    passed = _gate("streaming-tools", Verdict.PASS, "", "preflight")
    passed = passed.model_copy(update={"level": "off", "status": "pass"})
    cause = _family(control, {"preflight/streaming-tools@off": passed}, "the change")
    assert cause.tag == "base" and cause.label == "fails on the control only"
    assert "nothing the change broke" in cause.action
    failed = passed.model_copy(update={"verdict": Verdict.FAIL, "status": "blocks"})
    assert _family(control, {"preflight/streaming-tools@off": failed}, "x").tag == "same"
    # the candidate's own gate where the control passed stays the change's
    cand = passed.model_copy(update={"verdict": Verdict.FAIL, "status": "blocks"})
    ctrl_pass = control.model_copy(update={"verdict": Verdict.PASS, "status": "pass"})
    key = "quality/control-preflight-streaming-tools@off"
    assert _family(cand, {key: ctrl_pass}, "x").tag == "differs"
