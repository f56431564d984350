"""The load's first-screen line, read back from the record it is made of: the knee as offered,
sent and completed with its pace and goodput interval, and what the soak says of it (its
verdict; a queue built below the knee's rate: the knee overstated)."""

from __future__ import annotations

from typing import Any

from qualify.capacity.record import Record
from qualify.capacity.section import figures
from qualify.present.record import GateOutcome, GateVerdict
from qualify.records import Verdict


def _gate(name: str, verdict: Verdict, *reasons: str, **metrics: Any) -> GateOutcome:
    return GateOutcome(
        key=f"capacity/{name}",
        stage="capacity",
        gate=name,
        verdict=verdict,
        required=True,
        critical=False,
        status="pass" if verdict is Verdict.PASS else "blocks",
        reasons=list(reasons),
        metrics=metrics,
        authoritative=GateVerdict(attempt=1, verdict=verdict),
    )


def _record(completed: int, last_p50: float, flight: list[int]) -> Record:
    cell = {"cell": "poisson-22.63rps", "rate_rps": 22.63, "offered_rps": 22.66}
    cell |= {"achieved_rps": 18.72, "pace": 0.939, "requests": 136, "completed": 136}
    knee: dict[str, Any] = {"cell": "poisson-22.63rps", "rate_rps": 22.63, "first_over": 32.0}
    knee |= {"goodput": 1.0, "goodput_ci95": [0.9725, 1.0], "statement": "serves 22.6 req/s"}
    rows = [[float(i), 0.0, 0, n, "HTTP 200", 1.0] for i, n in enumerate(flight)]
    soak = {"rate_rps": 16.97, "rate_from": "knee", "planned": 559, "completed": completed}
    soak |= {"ttft_drift": {"first_p50_s": 0.3656, "last_p50_s": last_p50, "drift_pct": 10.0}}
    soak |= {"timeline_columns": ["t_s", "progress", "completed", "in_flight", "health", "mem"]}
    soak |= {"timeline": rows, "unfinished": 559 - completed}
    return Record.model_validate({"load": {"cells": [cell], "knee": knee, "soak": soak}})


def test_the_knee_is_offered_sent_and_completed_and_a_queued_soak_overstates_it() -> None:
    drift = "TTFT drifted +1173% (median 0.3656 s in the first third, 4.655 s in the last)"
    failed = _gate("soak", Verdict.FAIL, drift, completed=559, planned=559)
    (line,) = figures(_record(559, 4.655, [2, 40, 96, 14]), [failed])
    assert line.startswith("load: knee 22.6 req/s offered, 22.7 sent, 18.7 completed")
    assert "(136 of 136 requests, pace 0.94 of it), goodput 100% (95% interval 97%–100%)" in line
    assert "next rate 32 req/s not held" in line
    assert "soak at 17 req/s, 0.75 of the knee: 559 of 559 completed" in line
    assert "TTFT p50 0.37 s -> 4.66 s, in flight 2 -> 96 at most" in line
    assert "a queue built below the knee's rate, so the knee overstates it" in line


def test_a_held_soak_and_a_stalled_one_say_so_and_no_more() -> None:
    (held,) = figures(_record(559, 0.30, [2, 3, 2]), [_gate("soak", Verdict.PASS)])
    assert held.endswith("(`capacity/soak` pass)") and "overstates" not in held
    (stalled,) = figures(_record(500, 9.0, [2, 90]), [_gate("soak", Verdict.FAIL)])
    assert "`capacity/soak` fail)" in stalled and "overstates" not in stalled
    grew = _gate("soak", Verdict.FAIL, "RSS grew 900 MiB over the soak", completed=559, planned=559)
    (growth,) = figures(_record(559, 0.30, [2, 3]), [grew])
    assert "overstates" not in growth, "a soak failed by growth says nothing of the knee"


def test_no_knee_is_said_with_why() -> None:
    rec = Record.model_validate({"load": {"knee": {"stopped": "step bound: 5 cells run"}}})
    assert figures(rec, []) == ["load: no knee held (step bound: 5 cells run); no soak"]
