"""A failed soak is named for what failed, and an unmeasured fidelity gate is not a disagreement:
the published vLLM load decision read "the engine stops making progress" for a soak where all
559 requests completed while a queue grew (in flight 2 -> 96), and "client and server timings
disagree" for a fidelity gate whose stage measured nothing."""

from __future__ import annotations

from typing import Any

from qualify.decision.causes import _family
from qualify.present.record import GateOutcome, GateVerdict
from qualify.records import Verdict


def _gate(gate: str, verdict: Verdict, reasons: list[str], **metrics: Any) -> GateOutcome:
    return GateOutcome(
        key=f"capacity/{gate}",
        stage="capacity",
        gate=gate,
        verdict=verdict,
        required=True,
        critical=False,
        status="blocks",
        reasons=reasons,
        metrics=metrics,
        authoritative=GateVerdict(attempt=1, verdict=verdict),
    )


DRIFT = "TTFT drifted +1173% (median 0.3656 s in the first third, 4.655 s in the last; bound 100%)"


def test_drift_with_every_request_completed_is_a_queue_not_a_stall() -> None:
    cause = _family(_gate("soak", Verdict.FAIL, [DRIFT], completed=559, planned=559), {}, "x")
    assert cause.family == "soak-queue" and "queue" in cause.title
    assert "stops making progress" not in cause.title and "knee" in cause.action


def test_drift_with_requests_left_unfinished_stays_a_stall() -> None:
    said = [DRIFT, "3 requests did not finish within the soak's drain"]
    cause = _family(_gate("soak", Verdict.FAIL, said, completed=556, planned=559), {}, "x")
    assert cause.family == "soak" and "stops making progress" in cause.title
    hung = ["hung: no progress for 20 s with 4 requests in flight"]
    assert _family(_gate("soak", Verdict.FAIL, hung, completed=9, planned=40), {}, "x").family == (
        "soak"
    )


def test_memory_growth_alone_is_growth() -> None:
    grew = ["GPU used memory (sampler, every card) grew 900 MiB over the soak (bound 512 MiB)"]
    cause = _family(_gate("soak", Verdict.FAIL, grew, completed=40, planned=40), {}, "x")
    assert cause.family == "soak-growth" and "grow" in cause.title


def test_an_unmeasured_fidelity_gate_is_not_a_disagreement() -> None:
    none = _gate("fidelity", Verdict.INCONCLUSIVE, ["nothing to judge: the stage measured nothing"])
    cause = _family(none, {}, "x")
    assert cause.family == "fidelity-unmeasured" and "disagree" not in cause.title
    bad = _gate("fidelity", Verdict.FAIL, ["decode ratio 1.034 over the 3% bound"])
    assert _family(bad, {}, "x").family == "fidelity"
    assert "disagree" in _family(bad, {}, "x").title


def test_the_traffic_and_acceptance_gates_have_families_of_their_own() -> None:
    """A failed replay, session, acceptance drift or acceptance at depth is named for itself,
    not with the gate's name for a title ("`capacity/sessions` passes")."""
    turn = "session 1 turn 2: the tool result is ignored: the answer does not give 417"
    sessions = _family(_gate("sessions", Verdict.FAIL, [turn]), {}, "x")
    assert sessions.family == "agent-sessions" and "tool" in sessions.action
    replay = _family(_gate("replay@replay-1x", Verdict.FAIL, ["request 3: broken"]), {}, "x")
    assert replay.family == "trace-replay"
    drift = _family(_gate("soak-acceptance", Verdict.FAIL, ["acceptance fell 35%"]), {}, "x")
    assert drift.family == "acceptance-drift"
    depth = _gate("acceptance-depth@4096", Verdict.FAIL, ["acceptance 0.2 at this rung"])
    depth = depth.model_copy(update={"stage": "context", "key": "context/acceptance-depth@4096"})
    assert _family(depth, {}, "x").family == "acceptance-depth"
