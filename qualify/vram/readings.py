"""What one sample of one GPU is, whatever the source: free, used, total memory and power."""

from __future__ import annotations

from dataclasses import dataclass

MIB = 1024 * 1024


@dataclass(frozen=True)
class Card:
    """One GPU as a source names it: `gpu` is its key in gates (`reserve@<gpu>`)."""

    gpu: str
    name: str
    total_mib: float
    uuid: str | None = None


@dataclass(frozen=True)
class Reading:
    """One sample of one card; `t` is seconds on the monotonic clock (time.monotonic)."""

    gpu: str
    t: float
    free_mib: float
    used_mib: float | None
    power_w: float | None


@dataclass(frozen=True)
class Lost:
    """A card that stopped answering: the run's telemetry of it ends here, and the gate errs."""

    gpu: str
    t: float
    why: str


@dataclass
class Poll:
    """What one read of a source gave: readings, cards lost, and scrape failures (missed)."""

    readings: list[Reading]
    lost: list[Lost]
    missed: list[str]


def number(text: str) -> float | None:
    """A CSV or exposition value as a float; `[N/A]`, `[Not Supported]` and blanks are None."""
    text = text.strip()
    if not text or text.startswith("["):
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return None if value != value else value  # NaN is no reading
