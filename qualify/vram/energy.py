"""Energy over a timed window, from the sampler's power readings.

The sampler reads each card's power every 250 ms (`power_w`, NVML's instantaneous field where
the driver has it). The energy of a window [t0, t1] on one card is the trapezoidal integral of
its power series over that window, the series linearly interpolated at both ends; summed over
the cards. A window the samples do not cover (fewer than two readings inside it plus its
edges, or a gap wider than `max_gap_s`) is **unmeasured**, with why, never a guess; without GPU
telemetry at all it is unmeasured "no GPU telemetry".

J per output token is the window's joules over the completion tokens the window produced: the
energy of the whole card (idle draw included) per token served, which is what an operator pays.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Mapping, Sequence

NO_TELEMETRY = "unmeasured: no GPU telemetry"


def _interp(ts: Sequence[float], ws: Sequence[float], t: float) -> float:
    i = bisect.bisect_left(ts, t)
    if i <= 0:
        return ws[0]
    if i >= len(ts):
        return ws[-1]
    t0, t1 = ts[i - 1], ts[i]
    if t1 == t0:
        return ws[i]
    return ws[i - 1] + (ws[i] - ws[i - 1]) * (t - t0) / (t1 - t0)


def integrate(
    ts: Sequence[float], ws: Sequence[float], t0: float, t1: float, max_gap_s: float = 1.0
) -> tuple[float | None, str | None]:
    """Joules of one card's power series (`ts` ascending, s; `ws` W) over [t0, t1]."""
    if t1 <= t0:
        return None, "an empty window"
    if len(ts) < 2 or ts[0] > t0 + max_gap_s or ts[-1] < t1 - max_gap_s:
        return None, "the power samples do not cover the window"
    lo = bisect.bisect_right(ts, t0)
    hi = bisect.bisect_left(ts, t1)
    pts = [(t0, _interp(ts, ws, t0))]
    pts += [(ts[i], ws[i]) for i in range(lo, hi)]
    pts.append((t1, _interp(ts, ws, t1)))
    gaps = [b[0] - a[0] for a, b in itertools.pairwise(pts)]
    if max(gaps) > max_gap_s:
        return None, f"a {max(gaps):.2f} s gap in the power samples (bound {max_gap_s:g} s)"
    joules = sum((b[0] - a[0]) * (a[1] + b[1]) / 2 for a, b in itertools.pairwise(pts))
    return joules, None


def window_energy(
    series: Mapping[str, tuple[Sequence[float], Sequence[float]]],
    t0: float,
    t1: float,
    max_gap_s: float = 1.0,
) -> dict[str, object]:
    """Energy of every card over [t0, t1]; `joules` is None unless every card was measured."""
    if not series:
        return {"joules": None, "why": NO_TELEMETRY, "cards": {}, "window_s": t1 - t0}
    got = {gpu: integrate(ts, ws, t0, t1, max_gap_s) for gpu, (ts, ws) in sorted(series.items())}
    whys = [f"card {gpu}: {why}" for gpu, (j, why) in got.items() if j is None]
    total = sum(j for j, _ in got.values() if j is not None)
    measured = not whys
    return {
        "joules": total if measured else None,
        "mean_power_w": total / (t1 - t0) if measured and t1 > t0 else None,
        "why": None if measured else "unmeasured: " + "; ".join(whys),
        "cards": {gpu: {"joules": j, "why": why} for gpu, (j, why) in got.items()},
        "window_s": round(t1 - t0, 4),
    }
