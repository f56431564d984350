"""The load gates (answers, goodput, harness, soak, energy), each fed failing data and seen to
fail, and passing data seen to pass; every gate file in gates/capacity/ loads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import capacity_judging as gates
import pytest

from qualify.gates.files import load_gates
from qualify.gates.thresholds import Thresholds
from qualify.records import Verdict

T = Thresholds()
P = gates.NoParams()
ROOT = Path(__file__).resolve().parents[3]


def test_every_load_gate_is_declared() -> None:
    declared, problems = load_gates(ROOT / "gates", "capacity")
    assert problems == []
    ids = {g.gate.id for g in declared}
    assert {"answers", "goodput", "harness", "soak", "energy"} <= ids


def answers(*cells: dict[str, Any]) -> dict[str, Any]:
    return {"answers": {"cells": list(cells)}}


def test_answers_fail_a_cell_with_a_broken_answer() -> None:
    ok = {"where": "256-c1", "lane": "candidate", "kind": "prose", "judged": 3, "broken": []}
    bad = {
        "where": "poisson-1rps",
        "lane": "candidate",
        "kind": "json",
        "judged": 4,
        "broken": [{"stream": 2, "problems": ["json: not JSON"], "files": []}],
    }
    got = {j.part: j for j in gates.answers(answers(ok, bad), P, T)}
    assert got["256-c1"].verdict is Verdict.PASS
    assert got["poisson-1rps"].verdict is Verdict.FAIL
    assert "stream 2: json: not JSON" in got["poisson-1rps"].reasons[0]
    empty = {**ok, "judged": 0}
    assert gates.answers(answers(empty), P, T)[0].verdict is Verdict.INCONCLUSIVE
    assert gates.answers({}, P, T)[0].verdict is Verdict.INCONCLUSIVE


def knee(**kw: Any) -> dict[str, Any]:
    k = {
        "rate_rps": 0.5,
        "goodput": 0.95,
        "goodput_ci95": [0.8, 0.99],
        "goodput_rps": 0.47,
        "lower_bound": False,
        "harness_error": False,
        "stopped": "saturated: goodput 0.40 < floor 0.9 at 1",
        "statement": "serves 0.5 req/s at goodput 95% under SLO TTFT ≤ 5 s (p95)",
        "slo": "TTFT ≤ 5 s (p95)",
    }
    k.update(kw)
    return {"load": {"knee": k}}


def test_goodput_passes_with_its_statement_and_fails_without_a_rate() -> None:
    (ok,) = gates.goodput_knee(knee(), P, T)
    assert ok.verdict is Verdict.PASS and ok.reasons[0].startswith("serves 0.5 req/s")
    (none,) = gates.goodput_knee(knee(rate_rps=None, statement="no rate met goodput"), P, T)
    assert none.verdict is Verdict.FAIL


def test_goodput_below_the_house_minimum() -> None:
    strict = Thresholds(capacity_min_goodput_rps=2.0)
    (fail,) = gates.goodput_knee(knee(), P, strict)
    assert fail.verdict is Verdict.FAIL and "below the house's minimum 2 req/s" in fail.reasons[0]
    (lb,) = gates.goodput_knee(knee(lower_bound=True, stopped="time bound"), P, strict)
    assert lb.verdict is Verdict.INCONCLUSIVE and "not at saturation" in lb.reasons[0]
    (met,) = gates.goodput_knee(knee(rate_rps=2.5), P, strict)
    assert met.verdict is Verdict.PASS


def test_goodput_harness_error_and_not_run() -> None:
    (err,) = gates.goodput_knee(knee(harness_error=True, stopped="harness: late"), P, T)
    assert err.verdict is Verdict.ERROR
    (skip,) = gates.goodput_knee({}, P, T)
    assert skip.verdict is Verdict.SKIPPED


def test_harness_errs_on_a_lagging_cell() -> None:
    data = {
        "load": {
            "cells": [
                {"cell": "poisson-1rps", "lag": {"send_lag_ms_p99": 3.0}, "harness_error": None},
                {
                    "cell": "burst-8",
                    "lag": {"send_lag_ms_p99": 900.0},
                    "harness_error": "the client sent requests late: send_lag_ms_p99 900 ms",
                },
            ],
            "soak": {"lag": {}, "harness_error": None},
        }
    }
    got = {j.part: j.verdict for j in gates.harness(data, P, T)}
    assert got == {"poisson-1rps": Verdict.PASS, "burst-8": Verdict.ERROR, "soak": Verdict.PASS}


def soak(**kw: Any) -> dict[str, Any]:
    s = {
        "rate_rps": 0.25,
        "rate_from": "knee",
        "duration_s": 160,
        "planned": 40,
        "completed": 40,
        "unfinished": 0,
        "hung": None,
        "ttft_drift": {"first_p50_s": 1.0, "last_p50_s": 1.1, "drift_pct": 10.0},
        "memory": {"source": "server process RSS (/proc)", "growth_mib": 3.0},
        "error_counters": {},
    }
    s.update(kw)
    return {"load": {"soak": s}}


def test_soak_passes_a_steady_engine() -> None:
    (ok,) = gates.soak_gate(soak(), P, T)
    assert ok.verdict is Verdict.PASS, ok.reasons


def test_soak_fails_a_hung_engine_by_name() -> None:
    hung = "hung engine: no progress for 20.4 s with 2 requests in flight; /health: HTTP 200 ×20"
    (j,) = gates.soak_gate(soak(hung=hung, completed=3), P, T)
    assert j.verdict is Verdict.FAIL and j.reasons == [hung]


def test_soak_fails_drift_memory_errors_and_no_completion() -> None:
    drift = {"first_p50_s": 1.0, "last_p50_s": 2.5, "drift_pct": 150.0}
    (j,) = gates.soak_gate(soak(ttft_drift=drift), P, T)
    assert j.verdict is Verdict.FAIL and "TTFT drifted +150%" in j.reasons[0]
    mem = {"source": "GPU used memory", "growth_mib": 4096.0}
    (j,) = gates.soak_gate(soak(memory=mem), P, T)
    assert j.verdict is Verdict.FAIL and "grew 4096 MiB" in j.reasons[0]
    (j,) = gates.soak_gate(soak(error_counters={"vllm:request_failure_total": 2.0}), P, T)
    assert j.verdict is Verdict.FAIL and "rose by 2" in j.reasons[0]
    (j,) = gates.soak_gate(soak(completed=0), P, T)
    assert j.verdict is Verdict.FAIL and "no request of 40 completed" in j.reasons[0]
    (j,) = gates.soak_gate(soak(unfinished=2), P, T)
    assert j.verdict is Verdict.FAIL
    (j,) = gates.soak_gate({}, P, T)
    assert j.verdict is Verdict.SKIPPED


def test_a_soak_too_short_to_show_anything_is_inconclusive_never_a_pass() -> None:
    """One completed request, or a rate from no held knee: inconclusive, naming what is short;
    the house's minimum is honoured; a record of an earlier build (no `rate_from`) is judged
    as that build judged it."""
    (j,) = gates.soak_gate(soak(completed=1, planned=1), P, T)
    assert j.verdict is Verdict.INCONCLUSIVE
    assert j.reasons == [
        "only 1 requests completed: a soak shows drift, growth and progress from at least 30 "
        "(thresholds.soak_min_requests)"
    ]
    (j,) = gates.soak_gate(soak(rate_from="lowest-tried"), P, T)
    assert j.verdict is Verdict.INCONCLUSIVE and "comes from no held knee" in j.reasons[0]
    (j,) = gates.soak_gate(soak(completed=40), P, Thresholds(soak_min_requests=41))
    assert j.verdict is Verdict.INCONCLUSIVE
    (j,) = gates.soak_gate(soak(rate_from="fixed", completed=30), P, T)
    assert j.verdict is Verdict.PASS
    (j,) = gates.soak_gate(soak(rate_from=None, completed=1, planned=1), P, T)
    assert j.verdict is Verdict.PASS


def test_a_drift_must_also_rise_by_the_houses_seconds() -> None:
    """Under a house that asks a rise of 0.5 s too: +163% from 0.21 s to 0.56 s (a CUDA
    llama-server's soak, docs/gpu/load.md) passes; +150% from 1 s to 2.5 s still fails; with no
    such bound (0, the default) both fail."""
    house = Thresholds(soak_min_ttft_drift_s=0.5)
    fast = {"first_p50_s": 0.21, "last_p50_s": 0.56, "drift_pct": 163.0}
    slow = {"first_p50_s": 1.0, "last_p50_s": 2.5, "drift_pct": 150.0}
    (j,) = gates.soak_gate(soak(ttft_drift=fast), P, house)
    assert j.verdict is Verdict.PASS, j.reasons
    (j,) = gates.soak_gate(soak(ttft_drift=slow), P, house)
    assert j.verdict is Verdict.FAIL
    assert "bound 100% and at least 0.5 s" in j.reasons[0]
    for drift in (fast, slow):
        (j,) = gates.soak_gate(soak(ttft_drift=drift), P, T)
        assert j.verdict is Verdict.FAIL


def test_a_drift_from_thin_thirds_is_not_judged() -> None:
    """Forty completed requests of which 15 carry a TTFT (5 per third): a +150% drift from
    them neither fails nor passes, it is inconclusive, naming the counts and the threshold;
    10 per third (the house's default) is judged; a record made before `per_third` is judged
    as before."""
    slow = {"first_p50_s": 1.0, "last_p50_s": 2.5, "drift_pct": 150.0}
    thin = {**slow, "answered": 15, "per_third": 5}
    (j,) = gates.soak_gate(soak(ttft_drift=thin), P, T)
    assert j.verdict is Verdict.INCONCLUSIVE
    assert j.reasons == [
        "TTFT drift not judged: 15 answered requests give 5 per third, fewer than 10 "
        "(thresholds.soak_min_third_requests)"
    ]
    steady = {"first_p50_s": 1.0, "last_p50_s": 1.1, "drift_pct": 10.0}
    (j,) = gates.soak_gate(soak(ttft_drift={**steady, "answered": 15, "per_third": 5}), P, T)
    assert j.verdict is Verdict.INCONCLUSIVE, "a steady drift from thin thirds passes nothing"
    (j,) = gates.soak_gate(soak(ttft_drift={**slow, "answered": 30, "per_third": 10}), P, T)
    assert j.verdict is Verdict.FAIL and "TTFT drifted +150%" in j.reasons[0]
    (j,) = gates.soak_gate(soak(ttft_drift={**steady, "answered": 30, "per_third": 10}), P, T)
    assert j.verdict is Verdict.PASS, j.reasons
    stricter = Thresholds(soak_min_third_requests=11)
    (j,) = gates.soak_gate(
        soak(ttft_drift={**steady, "answered": 30, "per_third": 10}), P, stricter
    )
    assert j.verdict is Verdict.INCONCLUSIVE
    (j,) = gates.soak_gate(soak(ttft_drift=slow), P, T)
    assert j.verdict is Verdict.FAIL, "no per_third: an earlier build's record, judged as then"


def test_drift_counts_each_third() -> None:
    """`soak.drift` says how many answered requests each third holds, also where it is too few
    for a median of each (one request a third: no drift figure at all)."""
    from qualify.capacity.soak import drift

    streams = [{"ttft_s": 0.1 * (i + 1), "planned_s": float(i)} for i in range(31)]
    streams.append({"ttft_s": None, "planned_s": 40.0})
    got = drift(streams)
    assert (got["answered"], got["per_third"]) == (31, 10)
    assert got["first_p50_s"] == pytest.approx(0.55) and got["last_p50_s"] == pytest.approx(2.65)
    few = drift(streams[:5])
    assert (few["per_third"], few["drift_pct"]) == (1, None)


CELL = {"cell": "256-c1", "length": 256, "concurrency": 1}


def test_energy_is_unmeasured_without_telemetry_and_a_figure_with_it() -> None:
    data = {
        "matrix": [
            {**CELL, "lane": "candidate", "energy": {"j_per_output_token": 0.42}},
            {
                **CELL,
                "lane": "incumbent",
                "energy": {"j_per_output_token": None, "why": "unmeasured: no GPU telemetry"},
            },
        ],
        "load": {"lane": "candidate", "cells": [{"cell": "poisson-1rps", "energy": None}]},
    }
    got = {j.part: j for j in gates.energy(data, P, T)}
    assert (
        got["256-c1"].verdict is Verdict.PASS and "0.42 J per output token" in got["256-c1"].reasons
    )
    assert got["incumbent-256-c1"].verdict is Verdict.INCONCLUSIVE
    assert got["incumbent-256-c1"].reasons == ["unmeasured: no GPU telemetry"]
    assert got["poisson-1rps"].verdict is Verdict.INCONCLUSIVE
