"""The capacity stage against the real local llama-server (one slot, a 2,048-token window).

A 2 × 3 matrix (128 and 512 tokens × c = 1, 2, 4; one run and one warm-up each) and two kinds
at one depth. One stage run serves every test here.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from qualify.records import StageResult, Verdict

pytestmark = pytest.mark.integration

_RESULT: dict[str, tuple[StageResult, Path]] = {}
LENGTHS = [128, 512]
LEVELS = [1, 2, 4]
WINDOW = 2048


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
                "runs = 3\nwarmups = 1": "runs = 1\nwarmups = 1",
                'kinds = ["prose", "code", "json", "list"]': 'kinds = ["prose", "json"]',
                "kind_depths = [1024]": "kind_depths = [512]",
                "kind_runs = 3": "kind_runs = 1",
            },
        )
        runner = stage_runner(cand)
        result = runner.stage("capacity")
        _RESULT["run"] = (result, runner.run.path / "capacity" / "attempt-001")
    return _RESULT["run"]


def _gate(result: StageResult, name: str) -> Any:
    return next(g for g in result.gates if g.gate == name)


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
    assert (attempt / result.data["plot"]).read_text().startswith("<svg")


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
