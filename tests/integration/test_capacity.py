"""The capacity stage against the real local llama-server (one slot, a 2,048-token window).

A 2 × 3 matrix (128 and 512 tokens × c = 1, 2, 4; one run and one warm-up each), two kinds at
one depth, the open-loop knee search at 128 tokens with a burst, and the house's soak. One
stage run serves every test here.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from qualify.capacity.record import Record
from qualify.records import StageResult, Verdict
from qualify.registry import parse_record

pytestmark = pytest.mark.integration

_RESULT: dict[str, tuple[StageResult, Path]] = {}
LENGTHS = [128, 512]
LEVELS = [1, 2, 4]
WINDOW = 2048
SOAK_S = 15.0


@pytest.fixture
def capacity(candidate_factory: Callable[..., Path], stage_runner: Any) -> tuple[StageResult, Path]:
    if "run" not in _RESULT:
        cand = candidate_factory(
            "capacity",
            stages=["capacity"],
            replace={
                '"-c", "8192"': f'"-c", "{WINDOW}"',
                "lengths = [256, 2048]": f"lengths = {LENGTHS}",
                "concurrency = [1, 2]": f"concurrency = {LEVELS}",
                'kinds = ["prose", "code", "json", "list"]': 'kinds = ["prose", "json"]',
                "kind_depths = [1024]": "kind_depths = [512]",
                "load = { length = 256,": "load = { length = 128,",
                "step_s = 12,": "step_s = 6,",
                "warmups = 1\nmax_tokens = 64": "warmups = 1\nmax_tokens = 32",
            },
        )
        runner = stage_runner(cand)
        # A house may set any soak length; half the default keeps the suite within its time.
        house = runner.runner.thresholds
        runner.runner.thresholds = house.model_copy(update={"soak_duration_s": SOAK_S})
        result = runner.stage("capacity")
        _RESULT["run"] = (result, runner.run.path / "capacity" / "attempt-001")
    return _RESULT["run"]


def _gate(result: StageResult, name: str) -> Any:
    return next(g for g in result.gates if g.gate == name)


def test_the_stage_writes_its_typed_record(capacity: tuple[StageResult, Path]) -> None:
    """The real stage's `data` reads into the capacity record and is exactly its JSON form."""
    result, _ = capacity
    record = parse_record("capacity", result.data)
    assert isinstance(record, Record) and result.data["record_version"] == 1
    assert record.model_dump(mode="json") == result.data
    assert record.load.knee is not None and record.load.knee.statement
    assert record.load.soak is not None and record.load.soak.hung is None


def test_every_cell_has_every_figure(capacity: tuple[StageResult, Path]) -> None:
    """Six cells, each with per-stream decode, aggregate, TTFT p50/p95, E2E, failures, the
    server-side queue and the chunk/token ratio; prompts sized to the token by the server."""
    result, _ = capacity
    rows = result.data["matrix"]
    assert sorted((r["length"], r["concurrency"]) for r in rows) == sorted(
        (n, c) for n in LENGTHS for c in LEVELS
    )
    for r in rows:
        assert r["counted_runs"] == 1, r["excluded_runs"]
        assert r["failed"] == 0 and r["cut"] == 0
        for key in (
            "decode_tok_s_p50",
            "aggregate_output_tok_s",
            "ttft_p50_s",
            "ttft_p95_s",
            "e2e_p50_s",
            "chunks_per_token",
            "queue_waiting_max",
            "queue_running_max",
        ):
            assert isinstance(r[key], int | float), (r["cell"], key)
        assert r["length"] - 10 <= r["prompt_tokens_p50"] <= r["length"], r
        assert r["requests"] == r["concurrency"]
    four = [r for r in rows if r["concurrency"] == 4]
    # one slot: with four streams sent at once, the server defers some of them
    assert all(r["queue_waiting_max"] >= 1 for r in four), four


def test_aggregate_agrees_with_the_server_counters(capacity: tuple[StageResult, Path]) -> None:
    """The client's completion tokens over each window match llama-server's own
    tokens_predicted_total delta within 3%, and the fidelity gate says so per cell."""
    result, _ = capacity
    for r in result.data["matrix"]:
        assert 0.97 <= r["server_ratio"] <= 1.03, r
    for c in result.data["matrix"]:
        assert _gate(result, f"fidelity@{c['cell']}").verdict is Verdict.PASS


def test_kinds_engine_capacity_and_plot(capacity: tuple[StageResult, Path]) -> None:
    """Per-kind decode with acceptance from the counters, the slot-based KV figures from
    /props and /slots, and the SVG plot in the evidence."""
    result, attempt = capacity
    kinds = {k["kind"]: k for k in result.data["kinds"]}
    assert set(kinds) == {"prose", "json"}
    for k in kinds.values():
        assert k["depth"] == 512 and k["counted_runs"] == 1
        assert isinstance(k["decode_tok_s_p50"], float)
        assert k["acceptance"] is not None and k["acceptance"]["drafts"] is not None
    eng = result.data["engine"]
    assert eng["slots"] == 1 and eng["kv_tokens"] == WINDOW
    assert eng["max_concurrency_at_full_context"] == 1.0
    svg = (attempt / result.data["plot"]).read_text()
    assert "<svg" in svg and "slot limit: 1 sequences" in svg
    assert "128 tok candidate: c1 " in svg and "floor 90%" in svg


def test_no_range_and_no_incumbent_are_said(capacity: tuple[StageResult, Path]) -> None:
    """Without declared ranges the range gate is inconclusive ("no range"), and the demo alias
    points at nothing: a first qualification, so the incumbent gate passes saying so."""
    result, _ = capacity
    rng = _gate(result, "expected-range")
    assert rng.verdict is Verdict.INCONCLUSIVE and "no range" in rng.reasons[0]
    inc = _gate(result, "incumbent")
    assert inc.verdict is Verdict.PASS and "first qualification" in inc.reasons[0]
    assert result.data["incumbent"]["status"] == "first"
    for name in ("requests", "measured", "engine"):
        assert _gate(result, name).verdict is Verdict.PASS, _gate(result, name).reasons


def test_every_cell_has_goodput_under_the_house_slos(capacity: tuple[StageResult, Path]) -> None:
    """Each matrix cell states its goodput (share, interval, rate) under the effective SLOs,
    the candidate's tightening applied."""
    result, _ = capacity
    slo = result.data["slo"]
    assert slo["ttft_s"] == 4.0 and slo["e2e_s"] == 15.0 and slo["percentile"] == 95
    for r in result.data["matrix"]:
        assert 0 <= r["goodput"] <= 1 and r["good"] <= r["requests"], r
        lo, hi = r["goodput_ci95"]
        assert lo <= r["goodput"] <= hi
        assert r["goodput_rps"] is not None


def test_the_knee_search_stops_by_itself(capacity: tuple[StageResult, Path]) -> None:
    """Poisson steps from 0.2 req/s, doubling; the search stops at saturation or at its bound,
    says which, and the goodput gate states "serves R req/s at goodput G" with its interval."""
    result, _ = capacity
    load = result.data["load"]
    cells = [c for c in load["cells"] if c["arrival"] == "poisson"]
    s = result.data["settings"]["load"]
    assert 1 <= len(cells) <= s["max_steps"] + s["refine"]
    assert load["requests"] <= s["max_requests"]
    knee = load["knee"]
    assert knee["stopped"].startswith(("saturated", "step bound", "time bound", "request bound"))
    for c in cells:
        assert c["requests"] >= s["min_requests"] and c["lag"]["ticks"] > 0
        assert c["harness_error"] is None, c["lag"]
        assert c["goodput_ci95"] is not None
    gate = _gate(result, "goodput")
    if knee["rate_rps"] is not None:
        assert gate.verdict is Verdict.PASS
        assert gate.reasons[0].startswith("serves ") and "95% interval" in gate.reasons[0]
    else:
        assert gate.verdict is Verdict.FAIL
    for g in result.gates:
        if g.gate.startswith("harness@"):
            assert g.verdict is Verdict.PASS, g.reasons
    (burst,) = [c for c in load["cells"] if c["arrival"] == "burst"]
    assert burst["requests"] == 4 and burst["cell"] == "burst-4"


def test_every_load_answer_is_judged(capacity: tuple[StageResult, Path]) -> None:
    """Every answered request of every load cell carries its judgement; the answers gate has a
    verdict per cell, failing only a cell whose answers broke, and saying why."""
    result, _ = capacity
    cells = result.data["answers"]["cells"]
    wheres = {c["where"] for c in cells}
    assert {r["cell"] for r in result.data["matrix"]} <= wheres
    assert {c["cell"] for c in result.data["load"]["cells"]} <= wheres and "soak" in wheres
    for c in cells:
        gate = _gate(result, f"answers@{c['where']}")
        # a cell whose every request was cut or unfinished (a slow, shared machine) has no answer
        # to judge: inconclusive, never a pass
        want = (
            Verdict.FAIL if c["broken"] else Verdict.PASS if c["judged"] else Verdict.INCONCLUSIVE
        )
        assert gate.verdict is want, gate.reasons
        for b in c["broken"]:
            assert b["problems"] and b["files"]


def test_the_soak_watches_a_live_engine(capacity: tuple[StageResult, Path]) -> None:
    """The house's soak (here 15 s) at three quarters of the knee: progress seen, requests
    completed, the server's RSS read, no hang, energy unmeasured on a machine without a GPU."""
    result, _ = capacity
    soak = result.data["load"]["soak"]
    assert soak["duration_s"] == SOAK_S and soak["hung"] is None
    assert soak["completed"] >= 1 and soak["progress"]["generated_delta"] > 0
    assert soak["memory"]["source"] == "server process RSS (/proc)"
    # A live engine is never called hung; whether its TTFT drift stays within the house's bound
    # depends on how busy the machine's two cores are (seen: +136% in a full suite run), so a
    # fail here may only be a drift or memory finding, measured and named.
    gate = _gate(result, "soak")
    assert not any("hung" in r for r in gate.reasons), gate.reasons
    if soak["completed"] < 30 and gate.verdict is not Verdict.FAIL:
        # the house's soak_min_requests: too short to show anything, unless it found a failure
        assert gate.verdict is Verdict.INCONCLUSIVE, gate.reasons
        assert gate.reasons[0].startswith(f"only {soak['completed']} requests completed")
        return
    assert gate.verdict in (Verdict.PASS, Verdict.FAIL), gate.reasons
    if gate.verdict is Verdict.FAIL:
        findings = ("drift", "memory", "did not finish within the soak's drain")
        assert all(any(f in r for f in findings) for r in gate.reasons), gate.reasons
    energy = [g for g in result.gates if g.gate.startswith("energy")]
    assert energy and all(g.verdict is Verdict.INCONCLUSIVE for g in energy)
    assert all("unmeasured" in g.reasons[0] for g in energy)
