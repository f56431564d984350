"""Lane figures (median of run-level p50s), deltas, spreads, and the paired per-request
differences with their bootstrap interval over prompts (`qualify.ab.stats.paired_summary`)."""

from __future__ import annotations

from collections.abc import Iterable

from qualify.ab.acceptance import combined
from qualify.ab.drive import timing_of
from qualify.ab.record import (
    LANES,
    Fidelity,
    Figures,
    Identical,
    Lane,
    LaneRuns,
    Listed,
    MetricRow,
    Request,
    Run,
    RunsCounted,
    Speculation,
    Spreads,
)
from qualify.ab.stats import delta_pct, paired_summary, within_noise
from qualify.candidate import Candidate
from qualify.httpclient.timing import fidelity as timing_fidelity
from qualify.httpclient.timing import median

# (name, unit, which direction is better)
METRICS: tuple[tuple[str, str, str], ...] = (
    ("decode_tok_s", "tok/s", "higher"),
    ("aggregate_output_tok_s", "tok/s", "higher"),
    ("ttfo_s", "s", "lower"),
    ("ttft_s", "s", "lower"),
    ("generation_s", "s", "lower"),
    ("e2e_s", "s", "lower"),
)


def run_values(runs: list[Run], metric: str) -> list[float]:
    """A metric's run-level values: a run's p50, or its aggregate output tok/s."""
    agg = metric == "aggregate_output_tok_s"
    values = (r.aggregate_output_tok_s if agg else getattr(r.p50, metric) for r in runs)
    return [float(v) for v in values if v is not None]


def lane_block(block: Lane, recipe: Candidate, runs: list[Run]) -> Lane:
    """A lane's recipe as the record names it, its runs, the lane figure (median of run-level
    values) and run-to-run spread [min, max] of each metric, and its acceptance over the runs."""
    values = {name: run_values(runs, name) for name, _, _ in METRICS}
    speculation = recipe.identity.speculation.model_dump(mode="json")
    return block.model_copy(
        update={
            "name": recipe.name,
            "variable": recipe.variable,
            "engine": recipe.identity.engine,
            "speculation": Speculation.model_validate(speculation),
            "runs": runs,
            "figure": Figures(**{k: median(v) for k, v in values.items()}),
            "spread": Spreads(**{k: [min(v), max(v)] if v else None for k, v in values.items()}),
            "acceptance": combined([r.acceptance for r in runs]),
        }
    )


def over_lanes(runs: LaneRuns, lanes: dict[str, Lane], concurrency: int) -> dict[str, object]:
    """What the record says over both lanes: the candidate's acceptance, every run's excluded
    and degenerate requests naming lane and run, and the fidelity: the client's timings against
    the server's own over every answered request, overall and per lane (with what counting SSE
    chunks instead of usage tokens would have reported), and the identical outputs."""
    listed = {
        key: [
            Listed(lane=lane, run=r.run, **e.model_dump())
            for lane in LANES
            for r in runs[lane]
            for e in getattr(r, key)
        ]
        for key in ("excluded", "degenerate")
    }
    answered = {
        lane: [timing_of(q) for r in rs for q in r.requests if q.failed is None]
        for lane, rs in runs.items()
    }
    per_lane = {}
    for lane, rs in runs.items():
        tokens, chunks = sum(r.completion_tokens for r in rs), sum(r.token_chunks for r in rs)
        usage = median(run_values(rs, "decode_tok_s"))
        chunked = median(run_values(rs, "decode_tok_s_if_chunks_counted"))
        error = 100.0 * (chunked - usage) / usage if chunked and usage else None
        per_lane[lane] = {
            **timing_fidelity(answered[lane]),
            "engine": lanes[lane].engine,
            "completion_tokens": tokens,
            "token_chunks": chunks,
            "chunks_per_token": chunks / tokens if tokens else None,
            "decode_tok_s": usage,
            "decode_tok_s_if_chunks_counted": chunked,
            "chunk_counting_error_pct": error,
        }
    fid = {
        **timing_fidelity(t for ts in answered.values() for t in ts),
        "concurrency": concurrency,
        "identical_outputs": _identical(runs),
        "lanes": per_lane,
    }
    return {
        "acceptance": lanes["candidate"].acceptance,
        **listed,
        "fidelity": Fidelity.model_validate(fid),
    }


def _counted(q: Request) -> bool:
    return not q.failed and not q.excluded and not q.degenerate


def pairs(cand: list[Run], ctrl: list[Run], metric: str) -> list[tuple[str, float]]:
    """(prompt, relative difference in %) for every request both lanes answered and counted at
    the same run and prompt; for the aggregate output, one pair per run (prompt `run N`)."""
    out: list[tuple[str, float]] = []
    theirs = {r.run: r for r in ctrl}
    for r in cand:
        other = theirs.get(r.run)
        if other is None:
            continue
        if metric == "aggregate_output_tok_s":
            a, b = r.aggregate_output_tok_s, other.aggregate_output_tok_s
            if a is not None and b is not None and b > 0:
                out.append((f"run {r.run}", 100.0 * (a - b) / b))
            continue
        base = {q.prompt: q for q in other.requests if _counted(q)}
        for q in r.requests:
            k = base.get(q.prompt)
            if k is None or not _counted(q):
                continue
            a, b = getattr(q, metric), getattr(k, metric)
            if isinstance(a, int | float) and isinstance(b, int | float) and b > 0:
                out.append((q.prompt, 100.0 * (a - b) / b))
    return out


def metric_rows(
    cand: list[Run], ctrl: list[Run], resamples: int, seed: int, exact: bool = True
) -> list[MetricRow]:
    """One row per metric: both lane figures (median of run-level values), the delta, and the
    paired statistic; `ci95` is its interval in the metric's unit, `within_noise` None where
    that interval is missing or "too few samples"."""
    rows: list[MetricRow] = []
    for i, (name, unit, better) in enumerate(METRICS):
        a, b = run_values(cand, name), run_values(ctrl, name)
        fa, fb = median(a), median(b)
        delta = fa - fb if fa is not None and fb is not None else None
        paired = paired_summary(pairs(cand, ctrl, name), resamples, seed + i, exact=exact)
        ci_pct = paired.ci95_pct
        ci = [fb * x / 100.0 for x in ci_pct] if ci_pct is not None and fb is not None else None
        rows.append(
            MetricRow(
                metric=name,
                unit=unit,
                better=better,
                candidate=fa,
                control=fb,
                delta=delta,
                delta_pct=delta_pct(delta, fb),
                ci95=ci,
                within_noise=None if paired.too_few else within_noise(ci),
                runs=RunsCounted(candidate=len(a), control=len(b)),
                paired=paired,
            )
        )
    return rows


def same_in_every_request(runs: Iterable[Run], a: str, b: str) -> bool:
    """Whether metrics `a` and `b` are one measure, equal in every timed request of `runs` (TTFO
    and first-visible TTFT where no token is reasoning); False for no requests at all."""
    seen = False
    for r in runs:
        for q in r.requests:
            if getattr(q, a) != getattr(q, b):
                return False
            seen = seen or getattr(q, a) is not None
    return seen


def _identical(lanes: LaneRuns) -> Identical:
    """Paired requests whose visible answers are byte-identical across the lanes (differing
    answers mean the lanes did different work, which the timing deltas then partly reflect)."""
    seen = {
        (r.run, q.prompt): q.content_sha256
        for r in lanes.get("control", [])
        for q in r.requests
        if q.failed is None
    }
    pairs = same = 0
    for r in lanes.get("candidate", []):
        for q in r.requests:
            other = seen.get((r.run, q.prompt))
            if other is not None and q.failed is None:
                pairs += 1
                same += other == q.content_sha256
    return Identical(pairs=pairs, identical=same)
