"""Small statistics for paired comparisons: medians, run-to-run spread, the paired bootstrap
interval, and the noise label read from that interval.

The A/B pairs requests: the same prompt at the same position of the same run, answered by both
lanes. Each pair gives one relative difference, `100 * (candidate - control) / control`; the
interval is a percentile bootstrap of the median of those differences, resampling prompts
(every pair of a drawn prompt comes along), so prompts that are long or short, easy or hard for
the drafter, weigh as they occur. An interval wider than the control's own figure (more than
100 percentage points) that does not even give the sign of the change says nothing about it:
it is marked `too_few` ("too few samples") and the speed gates call it inconclusive; so is a
comparison of fewer than two prompts, which has no interval. docs/ab.md states the method.

The bootstrap uses the standard library's `random.Random` with a fixed seed, so the same
evidence always yields the same interval.
"""

from __future__ import annotations

import random
from typing import Any

from qualify.httpclient.timing import median, percentile

__all__ = [
    "TOO_WIDE_PCT",
    "bootstrap_delta_ci",
    "delta_pct",
    "median",
    "paired_summary",
    "spread",
    "within_noise",
]

TOO_WIDE_PCT = 100.0
"""An interval of a relative difference wider than this (in percentage points, i.e. wider than
the control's figure itself) is "too few samples", never a result."""
MIN_PROMPTS = 2


def spread(values: list[float]) -> tuple[float, float] | None:
    """The run-to-run range (min, max) of a lane's run-level figures; None for no data."""
    if not values:
        return None
    return min(values), max(values)


def delta_pct(delta: float | None, base: float | None) -> float | None:
    """The delta as a percentage of the control's figure; None when the base is 0 or missing."""
    if delta is None or base is None or base == 0:
        return None
    return 100.0 * delta / base


def within_noise(ci: tuple[float, float] | list[float] | None) -> bool | None:
    """True when the delta's interval includes zero, False when it excludes it, None when there
    is no interval (a lane with fewer than two runs has no spread): unknown, never "noise".
    """
    if ci is None:
        return None
    lo, hi = ci
    return lo <= 0.0 <= hi


def bootstrap_delta_ci(
    a: list[float],
    b: list[float],
    resamples: int = 2000,
    seed: int = 0,
    level: float = 95.0,
) -> tuple[float, float] | None:
    """A percentile-bootstrap interval of median(a) - median(b), resampling runs per lane.

    None when either lane has fewer than two runs: one run has no spread, and an interval
    that resamples it alone would look certain. With few runs the interval is coarse (it can
    only take values built from the observed runs); it is shown beside the spread.
    """
    if len(a) < 2 or len(b) < 2:
        return None
    rng = random.Random(seed)
    deltas: list[float] = []
    for _ in range(resamples):
        ma = median(rng.choices(a, k=len(a)))
        mb = median(rng.choices(b, k=len(b)))
        assert ma is not None and mb is not None
        deltas.append(ma - mb)
    tail = (100.0 - level) / 2.0
    lo, hi = percentile(deltas, tail), percentile(deltas, 100.0 - tail)
    assert lo is not None and hi is not None
    return lo, hi


def paired_summary(
    pairs: list[tuple[str, float]],
    resamples: int = 2000,
    seed: int = 0,
    level: float = 95.0,
) -> dict[str, Any]:
    """The median of paired relative differences (in %) and its bootstrap interval over
    prompts. `pairs` holds (prompt id, difference in %), one entry per request pair.

    Returns `pairs`, `prompts`, `median_pct`, `ci95_pct` (None with fewer than two prompts),
    `too_few` (True when there is no interval, or it is wider than `TOO_WIDE_PCT`), `why` and
    `method`."""
    by_prompt: dict[str, list[float]] = {}
    for prompt, d in pairs:
        by_prompt.setdefault(prompt, []).append(float(d))
    values = [d for ds in by_prompt.values() for d in ds]
    out: dict[str, Any] = {
        "pairs": len(values),
        "prompts": len(by_prompt),
        "median_pct": median(values),
        "ci95_pct": None,
        "too_few": True,
        "why": None,
        "method": f"percentile bootstrap over prompts, {resamples} resamples, seed {seed}",
    }
    if len(by_prompt) < MIN_PROMPTS:
        out["why"] = f"{len(values)} pair(s) over {len(by_prompt)} prompt(s): no interval"
        return out
    rng = random.Random(seed)
    groups = list(by_prompt.values())
    meds: list[float] = []
    for _ in range(resamples):
        drawn = [d for g in rng.choices(groups, k=len(groups)) for d in g]
        m = median(drawn)
        assert m is not None
        meds.append(m)
    tail = (100.0 - level) / 2.0
    lo, hi = percentile(meds, tail), percentile(meds, 100.0 - tail)
    assert lo is not None and hi is not None
    out["ci95_pct"] = [lo, hi]
    if hi - lo > TOO_WIDE_PCT and lo <= 0.0 <= hi:
        out["why"] = (
            f"the interval ({lo:+.1f}% to {hi:+.1f}%) is wider than the control's own figure "
            "and does not even give the sign"
        )
    else:
        out["too_few"] = False
    return out
