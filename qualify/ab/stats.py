"""Small statistics for paired comparisons: medians, run-to-run spread, a bootstrap CI, and
the noise label read from that interval.

The bootstrap uses the standard library's `random.Random` with a fixed seed, so the same
evidence always yields the same interval.
"""

from __future__ import annotations

import random

from qualify.httpclient.timing import median, percentile

__all__ = ["bootstrap_delta_ci", "delta_pct", "median", "spread", "within_noise"]


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
