"""The matrix: prompt lengths × concurrency levels, each cell the median of its counted runs
(each figure's definition: docs/capacity.md, "A cell's figures").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from qualify.capacity.slo import Slo, goodput, number
from qualify.httpclient.timing import median, percentile

MEDIAN_KEYS = (
    "decode_tok_s_p50",
    "aggregate_output_tok_s",
    "ttft_p50_s",
    "e2e_p50_s",
    "chunks_per_token",
    "prompt_tokens_p50",
)


def cell_key(length: int, concurrency: int) -> str:
    return f"{length}-c{concurrency}"


def numbers(values: Iterable[object]) -> list[float]:
    return [float(v) for v in values if isinstance(v, int | float) and not isinstance(v, bool)]


def _items(v: object) -> list[object]:
    """A run's list (its streams, its TTFTs), else none."""
    return v if isinstance(v, list) else []


def field_of(v: object, key: str) -> object:
    """`key` of a part of a run (its queue, its energy, its server window), None without it."""
    return v.get(key) if isinstance(v, dict) else None


def _count(v: object) -> int:
    return int(number(v) or 0)


def _ratio(run: Mapping[str, object]) -> float | None:
    gen, tokens = run.get("server_generated_tokens"), number(run.get("completion_tokens"))
    return tokens / gen if isinstance(gen, int | float) and gen > 0 and tokens else None


def median_of_runs(runs: Sequence[Mapping[str, object]]) -> dict[str, object]:
    """A cell's figures over its counted runs; excluded runs are listed with why, not counted."""
    counted = [r for r in runs if not r.get("excluded")]
    out: dict[str, object] = {k: median(numbers([r.get(k) for r in counted])) for k in MEDIAN_KEYS}
    ttfts = [t for r in counted for t in _items(r.get("ttft_s"))]
    out["ttft_p95_s"] = percentile(numbers(ttfts), 95)
    out["server_ratio"] = median(numbers([_ratio(r) for r in counted]))
    out["server_decode_ratio"] = median(
        numbers([field_of(r.get("server_window"), "decode_ratio") for r in counted])
    )
    out |= {k: sum(_count(r.get(k)) for r in runs) for k in ("failed", "cut", "requests")}
    queues = [r["queue"] for r in runs if r.get("queue")]
    for key in ("waiting_max", "running_max"):
        vals = numbers([field_of(q, key) for q in queues])
        out[f"queue_{key}"] = max(vals) if vals else None
    out["energy"] = energy = cell_energy(counted)
    out["j_per_output_token"] = energy["j_per_output_token"]
    out["runs"], out["counted_runs"] = len(runs), len(counted)
    out["excluded_runs"] = [
        {"run": r.get("run"), "why": r["excluded"]} for r in runs if r.get("excluded")
    ]
    # the run-level figures behind each median, for the incumbent's intervals
    out["run_values"] = {
        k: numbers([r.get(k) for r in counted])
        for k in ("aggregate_output_tok_s", "decode_tok_s_p50")
    }
    return out


def cell_energy(runs: Sequence[Mapping[str, object]]) -> dict[str, object]:
    """J per output token over runs: their joules over their completion tokens; unmeasured,
    with the first reason, when a run's window has no energy."""
    ens = [r.get("energy") for r in runs]
    if not runs:
        return {"j_per_output_token": None, "why": "no counted run"}
    missing = [e for e in ens if not e or field_of(e, "joules") is None]
    if missing:
        why = field_of(missing[0], "why") or "unmeasured: no GPU telemetry"
        return {"j_per_output_token": None, "joules": None, "why": why}
    joules = sum(float(j) for e in ens if isinstance(j := field_of(e, "joules"), int | float))
    tokens = sum(_count(r.get("completion_tokens")) for r in runs)
    return {
        "j_per_output_token": joules / tokens if tokens else None,
        "joules": joules,
        "completion_tokens": tokens,
        "why": None if tokens else "no completion tokens",
    }


def saturation(cell: Mapping[str, object], max_ttft_p95_s: float | None) -> str | None:
    """Why raising concurrency past this cell is pointless, or None."""
    if cell.get("failed") or cell.get("cut"):
        return f"{cell['failed']} failed and {cell['cut']} cut requests"
    p95 = cell.get("ttft_p95_s")
    if max_ttft_p95_s is not None and isinstance(p95, int | float) and p95 > max_ttft_p95_s:
        return f"p95 TTFT {p95:.2f} s is past the bound {max_ttft_p95_s:g} s"
    return None


def public_runs(runs: Sequence[Mapping[str, object]]) -> list[dict[str, object]]:
    """Run records as kept in `data`: streams trimmed to what the decision needs."""
    keep = ("failed", "cut", "degenerate", "broken", "finish_reason", "completion_tokens", "files")
    return [
        {k: v for k, v in r.items() if k not in ("streams", "ttft_s")}
        | {"streams": [{k: field_of(s, k) for k in keep} for s in _items(r.get("streams"))]}
        for r in runs
    ]


def run_goodput(runs: Sequence[Mapping[str, object]], slo: Slo) -> dict[str, object]:
    """A closed-loop cell's goodput over every run (excluded ones too: a broken or failed
    request is a request that missed), the rate over the runs' summed windows."""
    streams = [st for r in runs for st in _items(r.get("streams")) if isinstance(st, dict)]
    windows = [w for r in runs if isinstance(w := r.get("window_s"), int | float)]
    g = goodput(streams, slo, sum(windows) if windows else None)
    return g.model_dump(include={"good", "goodput", "goodput_ci95", "goodput_rps", "slo_met"})
