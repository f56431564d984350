"""Lane figures (median of run-level p50s), deltas, spreads and bootstrap intervals."""

from __future__ import annotations

from typing import Any

from qualify.ab.stats import bootstrap_delta_ci, delta_pct, spread, within_noise
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
    """One row per metric: both lane figures, the delta, its percentage, CI and noise label."""
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
                "within_noise": within_noise(delta, spread(a), spread(b)),
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


def fidelity(lanes: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Cross-checks: client against server timings, and what counting chunks would report."""
    reqs = [q for runs in lanes.values() for r in runs for q in r["requests"] if not q["excluded"]]
    ratios = [q["decode_ratio_client_over_server"] for q in reqs]
    gaps = [q["ttft_minus_server_prompt_ms"] for q in reqs]
    per_lane: dict[str, Any] = {}
    for lane, runs in lanes.items():
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
        per_lane[lane] = {
            "completion_tokens": tokens,
            "token_chunks": chunks,
            "chunks_per_token": chunks / tokens if tokens else None,
            "decode_tok_s": usage_fig,
            "decode_tok_s_if_chunks_counted": chunk_fig,
            "chunk_counting_error_pct": err,
        }
    return {
        "identical_outputs": _identical(lanes),
        "n": sum(1 for v in ratios if v is not None),
        "decode_ratio_median": median([v for v in ratios if v is not None]),
        "ttft_minus_server_prompt_ms_median": median([v for v in gaps if v is not None]),
        "lanes": per_lane,
    }
