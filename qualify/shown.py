"""What an interval shows, in words: the one place that decides "faster", "slower", "more",
"less", "regression" and "improvement". A direction is claimed only when the whole 95%
interval lies beyond zero, or beyond the house's margin when one is given; otherwise the words
say that no difference was shown, with the interval."""

from __future__ import annotations

from typing import Literal

Direction = Literal["up", "down"]


def direction(lo: float | None, hi: float | None, margin: float = 0.0) -> Direction | None:
    """`up` when the whole interval lies above +margin, `down` when below -margin, else None
    (no interval: nothing shown)."""
    if lo is None or hi is None:
        return None
    lo, hi = sorted((lo, hi))
    if lo > margin:
        return "up"
    if hi < -margin:
        return "down"
    return None


def say(lo: float | None, hi: float | None, up: str, down: str) -> str:
    """`up` or `down` when the interval shows that direction; else "no difference shown" with
    the interval (or "no interval")."""
    d = direction(lo, hi)
    if d is not None:
        return up if d == "up" else down
    if lo is None or hi is None:
        return "no difference shown (no interval)"
    lo, hi = sorted((lo, hi))
    return f"no difference shown (95% interval {lo:+.1f}% to {hi:+.1f}%)"


def speed_title(gain_lo: float | None, gain_hi: float | None) -> str:
    """The blocking A/B speed cause in words, from the interval of the candidate's speed gain
    over the control (per cent, positive = faster)."""
    d = direction(gain_lo, gain_hi)
    if d == "down":
        return "the change is slower than the control"
    if d == "up":
        return "the change is faster than the control, by less than the house requires"
    return "the change is not shown faster than the control"
