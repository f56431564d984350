"""Lane figures (median of run-level p50s), deltas, spreads and bootstrap intervals."""

from __future__ import annotations

from typing import Any

from qualify.ab.drive import timing_of
from qualify.ab.stats import bootstrap_delta_ci, delta_pct, spread, within_noise
from qualify.httpclient.timing import fidelity as timing_fidelity
from qualify.httpclient.timing import median

__all__ = ["METRICS", "fidelity", "lane_figures", "metric_rows", "run_values"]

# (name, unit, which direction is better)
METRICS: tuple[tuple[str, str, str], ...] = (
    ("decode_tok_s", "tok/s", "higher"),
    ("aggregate_output_tok_s", "tok/s", "higher"),
    ("ttfo_s", "s", "lower"),
    ("ttft_s", "s", "lower"),
    ("generation_s", "s", "lower"),
    ("e2e_s", "s", "lower"),
)


def run_values(runs: list[dict[str, Any]], metric: str) -> list[float]:
    """A metric's run-level values: a run's p50, or its aggregate output tok/s."""
    out = []
    for r in runs:
        v = (
            r.get(metric)
            if metric == "aggregate_output_tok_s"
            else (r.get("p50") or {}).get(metric)
        )
        if isinstance(v, int | float):
            out.append(float(v))
    return out


def lane_figures(runs: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The lane figure (median of run-level values) and the run-to-run spread of each metric."""
    figure: dict[str, Any] = {}
    spreads: dict[str, Any] = {}
    for name, _, _ in METRICS:
        values = run_values(runs, name)
        figure[name] = median(values)
        s = spread(values)
        spreads[name] = list(s) if s is not None else None
    return figure, spreads


def metric_rows(
    cand: list[dict[str, Any]], ctrl: list[dict[str, Any]], resamples: int, seed: int
) -> list[dict[str, Any]]:
    """One row per metric: both lane figures, the delta, its percentage, CI and noise label
    (within noise only when the interval includes zero; None without an interval)."""
    rows = []
    for i, (name, unit, better) in enumerate(METRICS):
        a, b = run_values(cand, name), run_values(ctrl, name)
        fa, fb = median(a), median(b)
        delta = fa - fb if fa is not None and fb is not None else None
        ci = bootstrap_delta_ci(a, b, resamples, seed + i)
        rows.append(
            {
                "metric": name,
                "unit": unit,
                "better": better,
                "candidate": fa,
                "control": fb,
                "delta": delta,
                "delta_pct": delta_pct(delta, fb),
                "ci95": list(ci) if ci is not None else None,
                "within_noise": within_noise(ci),
                "runs": {"candidate": len(a), "control": len(b)},
            }
        )
    return rows


def _identical(lanes: dict[str, list[dict[str, Any]]]) -> dict[str, int]:
    """Paired requests whose visible answers are byte-identical across the lanes.

    At temperature 0 a lossless drafter changes speed, not text; differing answers mean the
    lanes did different work, which the timing deltas then partly reflect.
    """
    seen = {
        (r["run"], q["prompt"]): q["content_sha256"]
        for r in lanes.get("control", [])
        for q in r["requests"]
        if q["failed"] is None
    }
    pairs = same = 0
    for r in lanes.get("candidate", []):
        for q in r["requests"]:
            other = seen.get((r["run"], q["prompt"]))
            if other is not None and q["failed"] is None:
                pairs += 1
                same += other == q["content_sha256"]
    return {"pairs": pairs, "identical": same}


def _chunking(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """What counting SSE chunks instead of usage tokens would have reported for one lane."""
    tokens = sum(r["completion_tokens"] for r in runs)
    chunks = sum(r["token_chunks"] for r in runs)
    usage_fig = median(run_values(runs, "decode_tok_s"))
    chunk_fig = median(
        [
            float(r["p50"]["decode_tok_s_if_chunks_counted"])
            for r in runs
            if r["p50"].get("decode_tok_s_if_chunks_counted") is not None
        ]
    )
    err = 100.0 * (chunk_fig - usage_fig) / usage_fig if chunk_fig and usage_fig else None
    return {
        "completion_tokens": tokens,
        "token_chunks": chunks,
        "chunks_per_token": chunks / tokens if tokens else None,
        "decode_tok_s": usage_fig,
        "decode_tok_s_if_chunks_counted": chunk_fig,
        "chunk_counting_error_pct": err,
    }


def fidelity(
    lanes: dict[str, list[dict[str, Any]]], engines: dict[str, str], concurrency: int
) -> dict[str, Any]:
    """The client's timings against the server's own (`qualify.httpclient.timing.fidelity`)
    over every answered timed request, overall and per lane with the lane's engine (the
    `fidelity` gate judges each lane), plus chunk counting and identical outputs."""
    answered = {
        lane: [timing_of(q) for r in runs for q in r["requests"] if q["failed"] is None]
        for lane, runs in lanes.items()
    }
    per_lane = {
        lane: {
            **timing_fidelity(answered[lane]),
            "engine": engines.get(lane),
            **_chunking(runs),
        }
        for lane, runs in lanes.items()
    }
    return {
        **timing_fidelity(t for ts in answered.values() for t in ts),
        "concurrency": concurrency,
        "identical_outputs": _identical(lanes),
        "lanes": per_lane,
    }
