"""One worker's share of an open-loop cell (`qualify.capacity.spread`): what a Ray actor runs.

It sends requests i, i+n, … of the driver's schedule from the shared start with qualify's own
sender, and hands each exchange back raw, its times on the driver's clock (the worker's minus
its offset); the statistics are never computed here.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from qualify.capacity.openloop import Flight, Plan, send
from qualify.httpclient.client import Client, Exchange


@dataclass
class ShardSpec:
    """One worker's share of one cell, as the driver sends it."""

    indices: list[int]  # the requests of the cell this worker sends, in order
    bodies: list[object]
    offsets: list[float]  # planned, seconds after the shared start
    start_s: float  # the shared start, on the driver's clock
    offset_s: float  # this worker's clock minus the driver's
    deadline_s: float
    base_url: str
    api_key: str | None = None
    client_timeout_s: float = 120.0
    timeout_s: float | None = None


@dataclass
class ShardResult:
    """What a worker's share came to; exchanges not yet polled ride along in `done`."""

    indices: list[int]
    sent_s: list[float | None]  # actual send time from the shared start (driver's clock)
    unfinished: list[str | None]
    done: list[tuple[int, Exchange]]
    oversleep_ms: list[float]
    start_late_s: float
    cpu_s: float
    window_end_s: float  # when its send returned, from the shared start


@dataclass
class Polled:
    """What ended since the last poll, and what is in flight (sent at, on the driver's clock)."""

    done: list[tuple[int, Exchange]]
    running: dict[int, float]
    started: int
    completed: int


@dataclass
class Shard:
    """The worker's state across cells: one client per server, the cell running now."""

    clients: dict[tuple[str, str | None, float], Client] = field(default_factory=dict)
    stop: asyncio.Event | None = None
    flight: Flight = field(default_factory=Flight)
    done: list[tuple[int, Exchange]] = field(default_factory=list)
    offset_s: float = 0.0
    indices: list[int] = field(default_factory=list)

    def _ended(self, k: int, ex: Exchange) -> None:
        ex.t_sent -= self.offset_s  # onto the driver's clock
        self.done.append((self.indices[k], ex))

    async def run(self, spec: ShardSpec) -> ShardResult:
        """Send this worker's share from the shared start (see the module docstring)."""
        key = (spec.base_url, spec.api_key, spec.client_timeout_s)
        if key not in self.clients:  # one client per server, kept across cells
            self.clients[key] = Client(*key)
        self.stop, self.flight, self.done = asyncio.Event(), Flight(), []
        self.offset_s, self.indices = spec.offset_s, list(spec.indices)
        cpu0 = time.process_time()
        start = spec.start_s + spec.offset_s  # the shared start on this worker's clock
        if (wait := start - time.perf_counter()) > 0:
            await asyncio.sleep(wait)
        late = time.perf_counter() - start
        offsets = [o - late for o in spec.offsets]  # still anchored to the shared start
        cell = Plan(spec.bodies, offsets, spec.deadline_s - late, spec.timeout_s)
        cell.stop, cell.flight, cell.on_done = self.stop, self.flight, self._ended
        run = await send(self.clients[key], cell)
        shift = run.started - start
        done, self.done = self.done, []
        return ShardResult(
            indices=list(spec.indices),
            sent_s=[None if s.sent_s is None else s.sent_s + shift for s in run.sent],
            unfinished=[s.unfinished for s in run.sent],
            done=done,
            oversleep_ms=run.oversleep_ms,
            start_late_s=shift,
            cpu_s=time.process_time() - cpu0,
            window_end_s=time.perf_counter() - start,
        )

    async def poll(self) -> Polled:
        done, self.done = self.done, []
        running = {self.indices[k]: t - self.offset_s for k, t in self.flight.running.items()}
        return Polled(done, running, self.flight.started, self.flight.completed)

    async def halt(self) -> None:
        if self.stop is not None:
            self.stop.set()

    async def close(self) -> None:
        for c in self.clients.values():
            await c.aclose()
        self.clients.clear()


def split(n: int, workers: int) -> list[list[int]]:
    """The requests of each worker: worker k sends k, k+workers, k+2·workers, …"""
    return [list(range(k, n, workers)) for k in range(workers)]
