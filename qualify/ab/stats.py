"""Paired statistics (docs/ab.md states the method). Each request pair (same prompt, same run,
both lanes) gives `100 * (candidate - control) / control`; the interval is a percentile bootstrap
of their median resampling prompts (a drawn prompt brings all its pairs), so prompts weigh as
they occur. An interval over 100 points wide that does not even give the sign is `too_few`
("too few samples", inconclusive), as is one of fewer than two prompts.

Up to `EXACT_MAX` distinct resamples (24,310 for the 9 shipped prompts) the distribution is
enumerated whole, weighted, so no seed moves a printed digit (at 2,000 resamples the published
vLLM run's E2E lower bound ran from +19.0% to +40.0% over seeds 1-20); past it, and for records
made before (`exact` absent), a seeded `random.Random` draws `resamples`, so the same evidence
always yields the same interval.
"""

from __future__ import annotations

import math
import random
from bisect import bisect_left
from collections.abc import Callable
from itertools import accumulate, combinations_with_replacement

from qualify.ab.record import Paired
from qualify.httpclient.timing import median, percentile

TOO_WIDE_PCT = 100.0  # percentage points: an interval wider than the control's figure itself
MIN_PROMPTS = 2
TAIL = 2.5  # per cent of the bootstrap distribution left out on each side of a 95% interval
EXACT_MAX = 25_000  # the most distinct resamples (multisets of prompts) enumerated whole


def delta_pct(delta: float | None, base: float | None) -> float | None:
    """The delta as a percentage of the control's figure; None when the base is 0 or missing."""
    if delta is None or base is None or base == 0:
        return None
    return 100.0 * delta / base


def within_noise(ci: tuple[float, float] | list[float] | None) -> bool | None:
    """Whether the delta's interval includes zero; None (unknown, never "noise") without one."""
    if ci is None:
        return None
    lo, hi = ci
    return lo <= 0.0 <= hi


def _median(values: list[float]) -> float:
    m = median(values)
    assert m is not None
    return m


def _interval(
    stat: Callable[[random.Random], float], resamples: int, seed: int
) -> tuple[float, float]:
    """The 95% percentile interval of `stat` over `resamples` draws of one seeded generator."""
    rng = random.Random(seed)
    values = [stat(rng) for _ in range(resamples)]
    lo, hi = percentile(values, TAIL), percentile(values, 100.0 - TAIL)
    assert lo is not None and hi is not None
    return lo, hi


def bootstrap_delta_ci(
    a: list[float], b: list[float], resamples: int = 2000, seed: int = 0
) -> tuple[float, float] | None:
    """A percentile-bootstrap interval of median(a) - median(b), resampling runs per lane; None
    when either lane has fewer than two runs (an interval of one run would look certain)."""
    if len(a) < 2 or len(b) < 2:
        return None
    return _interval(
        lambda rng: _median(rng.choices(a, k=len(a))) - _median(rng.choices(b, k=len(b))),
        resamples,
        seed,
    )


def exact_quantiles(groups: list[list[float]], qs: tuple[float, ...]) -> list[float]:
    """Percentiles `qs` of the median of the pooled values of k groups drawn from k with
    replacement, over every multiset of draws weighted by its multinomial chance: the bootstrap
    distribution itself, not a sample of it. Each is the smallest median whose cumulative chance
    reaches q (the value a percentile of ever more resamples settles on)."""
    k = len(groups)
    lf = [math.lgamma(i + 1) for i in range(k + 1)]
    base = lf[k] - k * math.log(k)
    dist: list[tuple[float, float]] = []
    for drawn in combinations_with_replacement(range(k), k):
        counts = [drawn.count(i) for i in range(k)]
        m = _median([d for g, c in zip(groups, counts, strict=True) if c for d in g * c])
        dist.append((m, math.exp(base - sum(lf[c] for c in counts))))
    dist.sort()
    cum = list(accumulate(w for _, w in dist))
    return [dist[min(bisect_left(cum, q / 100.0 - 1e-9), len(dist) - 1)][0] for q in qs]


def paired_summary(
    pairs: list[tuple[str, float]], resamples: int = 2000, seed: int = 0, exact: bool = True
) -> Paired:
    """The median of (prompt id, difference in %) pairs and its bootstrap interval over prompts;
    `exact=False` gives the resampled interval of records made before."""
    by_prompt: dict[str, list[float]] = {}
    for prompt, d in pairs:
        by_prompt.setdefault(prompt, []).append(float(d))
    values = [d for ds in by_prompt.values() for d in ds]
    k = len(by_prompt)
    n = math.comb(2 * k - 1, k) if k else 0
    whole = exact and k >= MIN_PROMPTS and n <= EXACT_MAX
    ci: list[float] | None = None
    why: str | None = f"{len(values)} pair(s) over {k} prompt(s): no interval"
    if k >= MIN_PROMPTS:
        groups = list(by_prompt.values())
        if whole:
            ci = exact_quantiles(groups, (TAIL, 100.0 - TAIL))
        else:
            pool = lambda rng: _median([d for g in rng.choices(groups, k=k) for d in g])  # noqa: E731
            ci = list(_interval(pool, resamples, seed))
        lo, hi = ci
        why = None
        if hi - lo > TOO_WIDE_PCT and lo <= 0.0 <= hi:
            why = (
                f"the interval ({lo:+.1f}% to {hi:+.1f}%) is wider than the control's own figure "
                "and does not even give the sign"
            )
    return Paired(
        pairs=len(values),
        prompts=k,
        median_pct=median(values),
        ci95_pct=ci,
        too_few=ci is None or why is not None,
        why=why,
        method=f"exact bootstrap over prompts (all {n:,} resamples of {k}, weighted)"
        if whole
        else f"percentile bootstrap over prompts, {resamples} resamples, seed {seed}",
        exact=whole,
    )
