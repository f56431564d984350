"""Cells from runs, saturation, the plan of lengths, the lane order, and the settings."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from qualify.capacity.loads import Load
from qualify.capacity.matrix import median_of_runs, saturation
from qualify.capacity.parts import plan_lengths
from qualify.capacity.plot import plot
from qualify.capacity.record import CellFigures, ExcludedRun, MatrixRow, RunRecord
from qualify.capacity.runs import StreamRec, exclusion, server_fidelity, summarize
from qualify.capacity.settings import CapacitySettings, ExpectedRange, parse_cell
from qualify.capacity.stage import turns
from qualify.serving.dialects import VLLM, MetricsSnapshot, dialect
from qualify.serving.idle import IdleReport

IDLE = {"before": {"idle": True, "reason": "idle"}, "after": {"idle": True, "reason": "idle"}}


def run(n: int, agg: float, decode: float, ttft: list[float], **kw: Any) -> RunRecord:
    r = {
        "run": n,
        "idle": IDLE,
        "requests": len(ttft),
        "failed": 0,
        "cut": 0,
        "degenerate": 0,
        "aggregate_output_tok_s": agg,
        "decode_tok_s_p50": decode,
        "ttft_p50_s": ttft[len(ttft) // 2],
        "e2e_p50_s": 2.0,
        "chunks_per_token": 1.0,
        "prompt_tokens_p50": 256,
        "completion_tokens": 64 * len(ttft),
        "server_generated_tokens": 64 * len(ttft),
        "queue": {"waiting_max": 1.0, "running_max": 1.0},
    }
    out = RunRecord.model_validate(r | kw)
    out._ttft_s, out.excluded = ttft, exclusion(out)
    return out


def test_median_of_runs_leaves_an_excluded_run_out_but_keeps_it() -> None:
    runs = [
        run(1, 100.0, 50.0, [0.1, 0.2]),
        run(2, 5.0, 2.0, [9.0, 9.5], failed=1),
        run(3, 110.0, 60.0, [0.3, 0.4]),
        run(4, 90.0, 40.0, [0.2, 0.2]),
    ]
    cell = median_of_runs(runs, CellFigures)
    assert cell.aggregate_output_tok_s == 100.0  # median of 100, 110, 90; not 5
    assert cell.decode_tok_s_p50 == 50.0
    assert cell.counted_runs == 3 and cell.runs == 4
    assert cell.excluded_runs == [ExcludedRun(run=2, why="1 failed and 0 cut of 2 requests")]
    assert cell.failed == 1 and cell.requests == 8  # failures count over every run
    assert (cell.ttft_p95_s or 0) < 9.0  # p95 over counted streams only
    assert cell.server_ratio == 1.0


def test_median_of_runs_counts_every_run_when_none_is_excluded() -> None:
    cell = median_of_runs([run(1, 100.0, 50.0, [0.1]), run(2, 5.0, 2.0, [0.1])], CellFigures)
    assert cell.aggregate_output_tok_s == pytest.approx(52.5)
    assert cell.counted_runs == 2 and cell.excluded_runs == []


def test_exclusion_reasons() -> None:
    busy = {"before": {"idle": False, "reason": "engine busy"}}
    assert "not idle before" in str(exclusion(run(1, 1, 1, [0.1], idle=busy)))
    assert "degenerate" in str(exclusion(run(1, 1, 1, [0.1], degenerate=1)))
    assert exclusion(run(1, 1, 1, [0.1])) is None


def test_saturation_stops_on_failures_or_a_slow_p95() -> None:
    assert saturation(CellFigures(ttft_p95_s=3.0), None) is None
    assert saturation(CellFigures(ttft_p95_s=3.0), 5.0) is None
    assert "p95 TTFT 6.00 s" in str(saturation(CellFigures(ttft_p95_s=6.0), 5.0))
    assert "1 failed" in str(saturation(CellFigures(failed=1, ttft_p95_s=0.1), None))


def test_summarize_excludes_degenerate_streams_from_decode() -> None:
    base: StreamRec = {"failed": None, "cut": None, "prompt_tokens": 10, "token_chunks": 8}
    base["e2e_s"] = 1.0
    streams: list[StreamRec] = [
        {**base, "degenerate": None, "completion_tokens": 8, "decode_tok_s": 10.0, "ttft_s": 0.1},
        {**base, "degenerate": "run", "completion_tokens": 8, "decode_tok_s": 99.0, "ttft_s": 0.1},
        {
            **base,
            "failed": "HTTP 500",
            "degenerate": None,
            "completion_tokens": None,
            "decode_tok_s": None,
            "ttft_s": None,
        },
    ]
    s = summarize(streams, 2.0)
    assert s.decode_tok_s_p50 == 10.0 and s.degenerate == 1 and s.failed == 1
    assert s.aggregate_output_tok_s == 8.0 and s.chunks_per_token == 1.0


def test_plan_lengths_clamps_and_names_duplicates() -> None:
    plan = plan_lengths([256, 4096, 8192], 2048, 64)
    assert [(p.planned_tokens, p.clamped, p.same_as) for p in plan] == [
        (256, False, None),
        (1984, True, None),
        (1984, True, 4096),
    ]
    assert plan_lengths([256], 64, 64)[0].errors


def test_turns_alternate_with_an_incumbent() -> None:
    assert turns(3, False) == [("candidate", [1, 2, 3])]
    assert [lane[0] for lane in turns(3, True)] == [
        "candidate",
        "incumbent",
        "incumbent",
        "candidate",
        "candidate",
        "incumbent",
    ]


def test_expected_range_settings() -> None:
    assert parse_cell("c6") == (None, 6) and parse_cell("2048-c6") == (2048, 6)
    assert parse_cell("*-c2") == (None, 2)
    assert ExpectedRange(cell="c1", min=73, max=76).covers(256, 1)
    assert not ExpectedRange(cell="2048-c1", min=73).covers(256, 1)
    with pytest.raises(ValidationError, match=r"min 80\.0 is above max 76\.0"):
        ExpectedRange(cell="c1", min=80, max=76)
    with pytest.raises(ValidationError, match="expected min, max or both"):
        ExpectedRange(cell="c1")
    with pytest.raises(ValidationError, match="expected a cell like c6"):
        ExpectedRange(cell="six", min=1)
    with pytest.raises(ValidationError, match="concurrency lists a value twice"):
        CapacitySettings(concurrency=[1, 1])
    assert CapacitySettings(lengths=[128]).depths == [128]


def test_plot_has_a_numeric_legend_and_the_slot_limit() -> None:
    """matplotlib SVG: one line per lane and length, each legend entry with its figures at
    every concurrency, the incumbent dashed, the engine's slot limit as a line."""
    rows = [
        MatrixRow(
            lane=lane, cell=f"{n}-c{c}", length=n, concurrency=c, aggregate_output_tok_s=10.0 * c
        )
        for lane in ("candidate", "incumbent")
        for n in (256, 2048)
        for c in (1, 2, 4)
    ]
    out = plot(rows, "demo <matrix>", slots=2).decode()
    assert "<svg" in out and "demo &lt;matrix&gt;" in out
    assert out.count("256 tok candidate: c1 10, c2 20, c4 40 tok/s") == 1
    assert "2048 tok incumbent: c1 10, c2 20, c4 40 tok/s" in out
    assert "slot limit: 2 sequences" in out
    assert "stroke-dasharray" in out


def test_plot_draws_goodput_against_rate_with_floor_and_knee() -> None:
    load = Load.model_validate(
        {
            "slo": {"goodput_floor": 0.9},
            "knee": {"rate_rps": 0.5, "slo": "TTFT ≤ 5 s (p95)"},
            "cells": [
                {"rate_rps": 0.25, "goodput": 1.0, "goodput_ci95": [0.7, 1.0]},
                {"rate_rps": 0.5, "goodput": 0.95, "goodput_ci95": [0.7, 1.0]},
                {"rate_rps": 1.0, "goodput": 0.4, "goodput_ci95": [0.2, 0.6]},
            ],
        }
    )
    out = plot([], "t", None, load).decode()
    assert "floor 90%" in out and "knee 0.5 req/s" in out
    assert "goodput: 0.25/s 100%, 0.5/s 95%, 1/s 40%" in out


FIX = Path(__file__).resolve().parents[3] / "tests" / "fixtures" / "engines" / "vllm"


def _idle(page: str | None) -> IdleReport:
    snap = MetricsSnapshot.parse((FIX / page).read_text()) if page else None
    return IdleReport(True, 0.0, 0.0, 0.0, 1, "idle", snap)


def test_each_run_is_held_against_the_servers_histograms() -> None:
    """The vLLM fidelity hook: a run's window is read from the server's latency histograms
    between its idle scrapes and checked against the requests the run sent (the recorded
    window counted 11; a run of none is refused, not compared); llama.cpp keeps none."""
    before, after = _idle("metrics_spec_idle.prom"), _idle("metrics_spec_after.prom")
    got = server_fidelity(before, after, VLLM, [], [])
    assert got["window"]["requests"] == 11 and "decode_ratio" not in got
    assert "counted 11 requests" in got["why"]
    none = server_fidelity(_idle(None), _idle(None), dialect("llama.cpp"), [], [])
    assert none == {"window": None, "why": "the server keeps no latency histograms"}


def test_plot_draws_a_cell_where_every_request_missed() -> None:
    """A share of 0 whose Wilson lower bound rounds a hair above it draws no negative bar."""
    load = Load.model_validate(
        {
            "slo": {"goodput_floor": 0.9},
            "cells": [
                {"rate_rps": 0.2, "goodput": 0.0, "goodput_ci95": [1e-17, 0.49]},
                {"rate_rps": 0.1, "goodput": 1.0, "goodput_ci95": [0.51, 1.0 - 1e-17]},
            ],
        }
    )
    assert "goodput: 0.1/s 100%, 0.2/s 0%" in plot([], "t", None, load).decode()
