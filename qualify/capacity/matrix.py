"""The matrix: prompt lengths × concurrency levels, each cell the median of its counted runs
(each figure's definition: docs/capacity.md, "A cell's figures").
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TypeVar

from qualify.capacity.parts import Energy
from qualify.capacity.record import CellFigures, ExcludedRun, RunRecord, RunValues
from qualify.capacity.runs import StreamRec
from qualify.capacity.slo import Slo, goodput
from qualify.httpclient.timing import median, percentile

MEDIAN_KEYS = (
    "decode_tok_s_p50",
    "aggregate_output_tok_s",
    "ttft_p50_s",
    "e2e_p50_s",
    "chunks_per_token",
    "prompt_tokens_p50",
)
Row = TypeVar("Row", bound=CellFigures)


def cell_key(length: int, concurrency: int) -> str:
    return f"{length}-c{concurrency}"


def _given(values: Iterable[float | None]) -> list[float]:
    return [float(v) for v in values if v is not None]


def _ratio(run: RunRecord) -> float | None:
    gen, tokens = run.server_generated_tokens, run.completion_tokens
    return tokens / gen if gen is not None and gen > 0 and tokens else None


def median_of_runs(runs: Sequence[RunRecord], row: type[Row], **more: object) -> Row:
    """A cell's figures over its counted runs, as a `row` with `more`; excluded runs are listed
    with why, not counted."""
    counted = [r for r in runs if not r.excluded]
    queues = [r.queue for r in runs if r.queue]
    energy = cell_energy(counted)
    out = {k: median(_given(getattr(r, k) for r in counted)) for k in MEDIAN_KEYS} | {
        "ttft_p95_s": percentile([t for r in counted for t in r._ttft_s], 95),
        "server_ratio": median(_given(_ratio(r) for r in counted)),
        "server_decode_ratio": median(
            _given(r.server_window.decode_ratio for r in counted if r.server_window)
        ),
        "failed": sum(r.failed for r in runs),
        "cut": sum(r.cut for r in runs),
        "requests": sum(r.requests for r in runs),
        "queue_waiting_max": max(_given(q.waiting_max for q in queues), default=None),
        "queue_running_max": max(_given(q.running_max for q in queues), default=None),
        "energy": energy,
        "j_per_output_token": energy.j_per_output_token,
        "runs": len(runs),
        "counted_runs": len(counted),
        "excluded_runs": [ExcludedRun(run=r.run, why=r.excluded) for r in runs if r.excluded],
        # the run-level figures behind each median, for the incumbent's intervals
        "run_values": RunValues(
            aggregate_output_tok_s=_given(r.aggregate_output_tok_s for r in counted),
            decode_tok_s_p50=_given(r.decode_tok_s_p50 for r in counted),
        ),
        "idle_unknown": any(r.idle.before.idle is None for r in runs),
        "run_records": runs,
    }
    return row.model_validate(out | more)


def cell_energy(runs: Sequence[RunRecord]) -> Energy:
    """J per output token over runs: their joules over their completion tokens; unmeasured,
    with the first reason, when a run's window has no energy."""
    if not runs:
        return Energy(j_per_output_token=None, why="no counted run")
    missing = [r.energy for r in runs if r.energy is None or r.energy.joules is None]
    if missing:
        why = (missing[0].why if missing[0] else None) or "unmeasured: no GPU telemetry"
        return Energy(j_per_output_token=None, joules=None, why=why)
    joules = sum(r.energy.joules or 0.0 for r in runs if r.energy)
    tokens = sum(r.completion_tokens for r in runs)
    return Energy(
        j_per_output_token=joules / tokens if tokens else None,
        joules=joules,
        completion_tokens=tokens,
        why=None if tokens else "no completion tokens",
    )


def saturation(cell: CellFigures, max_ttft_p95_s: float | None) -> str | None:
    """Why raising concurrency past this cell is pointless, or None."""
    if cell.failed or cell.cut:
        return f"{cell.failed} failed and {cell.cut} cut requests"
    p95 = cell.ttft_p95_s
    if max_ttft_p95_s is not None and p95 is not None and p95 > max_ttft_p95_s:
        return f"p95 TTFT {p95:.2f} s is past the bound {max_ttft_p95_s:g} s"
    return None


def run_goodput(runs: Sequence[RunRecord], streams: list[StreamRec], slo: Slo) -> dict[str, object]:
    """A closed-loop cell's goodput over every run's streams (excluded ones too: a broken or
    failed request is a request that missed), the rate over the runs' summed windows."""
    windows = [r.window_s for r in runs if r.window_s is not None]
    g = goodput(streams, slo, sum(windows) if windows else None)
    return g.model_dump(include={"good", "goodput", "goodput_ci95", "goodput_rps", "slo_met"})
