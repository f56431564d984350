"""Is the engine idle? No running and no waiting requests, read from its own metrics.

`wait_idle` polls `/metrics` until both gauges read zero or the time is up. A timed cell is
measured only between two idle reports; a busy engine is waited for, and a cell whose engine
never went idle is an `error`, never a figure. An engine with no such gauges gives `idle=None`
(unknown), which a gate reads as inconclusive, never as idle.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from pydantic import Field

from qualify.httpclient.client import Client
from qualify.records import Written
from qualify.serving.dialects import Dialect, MetricsSnapshot, busy


class Idle(Written):
    """One idle check as a stage record keeps it (`IdleReport.as_dict`); `idle` None: unknown."""

    idle: bool | None = None
    running: float | None = None
    waiting: float | None = None
    waited_s: float = 0.0
    polls: int = 0
    reason: str = ""


class IdleAround(Written):
    """The idle checks before and after a timed run or cell."""

    before: Idle = Field(default_factory=Idle)
    after: Idle | None = None


@dataclass
class IdleReport:
    """The outcome of one idle check, with the last scrape it read."""

    idle: bool | None
    running: float | None
    waiting: float | None
    waited_s: float
    polls: int
    reason: str
    snapshot: MetricsSnapshot | None = None

    def as_dict(self) -> dict[str, object]:
        """The fields of `Idle`, the wait rounded to the millisecond."""
        kept = {name: getattr(self, name) for name in Idle.model_fields}
        return kept | {"waited_s": round(self.waited_s, 3)}

    def since(self, before: IdleReport, names: tuple[str, ...]) -> float | None:
        """A counter's growth from `before`'s last scrape to this one's; None if either lacks it."""
        a, b = (None if r.snapshot is None else r.snapshot.first(names) for r in (before, self))
        return None if a is None or b is None else b - a


async def _scrape(client: Client) -> tuple[MetricsSnapshot | None, str]:
    ex = await client.get("/metrics", timeout_s=10.0)
    if not ex.ok:
        return None, ex.error or f"GET /metrics answered HTTP {ex.status}"
    if ex.text is None:
        return None, "GET /metrics answered no text"
    try:
        return MetricsSnapshot.parse(ex.text, time.monotonic()), ""
    except ValueError as exc:
        return None, f"GET /metrics is not Prometheus text: {exc}"


async def scrape(client: Client) -> MetricsSnapshot | None:
    """One scrape of the engine's `/metrics`; None when it cannot be read or parsed."""
    return (await _scrape(client))[0]


async def wait_idle(
    client: Client, dialect: Dialect, timeout_s: float, poll_s: float = 0.25
) -> IdleReport:
    """Poll until the engine has no running and no waiting request, for at most `timeout_s`."""
    t0 = time.monotonic()
    polls = 0
    while True:
        snap, why = await _scrape(client)
        polls += 1
        waited = time.monotonic() - t0
        if snap is None:
            return IdleReport(None, None, None, waited, polls, f"idle unknown: {why}")
        running, waiting = busy(snap, dialect)
        if running is None or waiting is None:
            names = ", ".join(dialect.running + dialect.waiting)
            why = f"idle unknown: /metrics has none of {names}"
            return IdleReport(None, running, waiting, waited, polls, why, snap)
        if running == 0 and waiting == 0:
            return IdleReport(True, running, waiting, waited, polls, "idle", snap)
        if waited >= timeout_s:
            why = (
                f"engine busy after waiting {waited:.1f} s: running={running:g}, "
                f"waiting={waiting:g} (expected 0 and 0)"
            )
            return IdleReport(False, running, waiting, waited, polls, why, snap)
        await asyncio.sleep(poll_s)
