"""Open-loop arrivals: requests sent at planned times whatever the server is doing, and the
client's own lag (send lag, loop oversleep): docs/capacity.md, "Open-loop arrivals and the
client's own lag".
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import random
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator, Sequence
from dataclasses import dataclass, field

from qualify.capacity.loads import Lag
from qualify.httpclient.client import Client, Exchange
from qualify.httpclient.load import CHAT
from qualify.httpclient.timing import percentile

TICK_S = 0.010
FIRST = asyncio.FIRST_COMPLETED


def poisson(rate_rps: float, n: int, seed: int) -> list[float]:
    """`n` send offsets (s) of a Poisson process at `rate_rps`; the first at 0."""
    rng = random.Random(seed)
    gaps = (rng.expovariate(rate_rps) for _ in range(n - 1))
    return list(itertools.accumulate(gaps, initial=0.0))[:n]


def burst(n: int) -> list[float]:
    return [0.0] * n


@dataclass
class Sent:
    """One open-loop request: its planned and actual send offsets, and what came back."""

    planned_s: float
    sent_s: float | None = None
    exchange: Exchange | None = None
    unfinished: str | None = None

    @property
    def lag_s(self) -> float | None:
        return None if self.sent_s is None else self.sent_s - self.planned_s


@dataclass
class OpenLoopRun:
    sent: list[Sent]
    started: float  # perf_counter at offset 0
    window_s: float | None
    oversleep_ms: list[float] = field(default_factory=list)

    def lag(self) -> Lag:
        lags = [s.lag_s * 1000 for s in self.sent if s.lag_s is not None]
        return Lag(
            send_lag_ms_p50=percentile(lags, 50),
            send_lag_ms_p99=percentile(lags, 99),
            send_lag_ms_max=max(lags) if lags else None,
            loop_oversleep_ms_p99=percentile(self.oversleep_ms, 99),
            loop_oversleep_ms_max=max(self.oversleep_ms) if self.oversleep_ms else None,
            ticks=len(self.oversleep_ms),
        )


def harness_lag(lag: Lag, bound_ms: float) -> str | None:
    """Why the client, not the server, fell behind in a cell; None when it kept up."""
    for key in ("send_lag_ms_p99", "loop_oversleep_ms_p99"):
        v = getattr(lag, key)
        if v is not None and v > bound_ms:
            what = "sent requests late" if key.startswith("send") else "read the server late"
            return f"the client {what}: {key} {v:.1f} ms > {bound_ms:g} ms"
    return None


def window(sent: list[Sent], ended: float) -> float | None:
    """To the last answer's end from the start; with a request unfinished, `ended` (s)."""
    if any(s.unfinished for s in sent):
        return ended
    ends = [
        s.sent_s + s.exchange.t_end
        for s in sent
        if s.exchange is not None and s.sent_s is not None and s.exchange.t_end is not None
    ]
    return max(ends, default=None)


async def _ticker(out: list[float]) -> None:
    while True:
        t = time.perf_counter()
        await asyncio.sleep(TICK_S)
        out.append(max(0.0, (time.perf_counter() - t - TICK_S) * 1000))


@dataclass
class Flight:
    """What is in flight right now, for a watcher on the same loop (the soak's)."""

    started: int = 0
    completed: int = 0
    running: dict[int, float] = field(default_factory=dict)  # request -> perf_counter sent

    @property
    def in_flight(self) -> int:
        return self.started - self.completed

    @contextlib.contextmanager
    def one(self, i: int) -> Iterator[None]:
        """Request `i` in flight for the length of the block."""
        self.started += 1
        self.running[i] = time.perf_counter()
        try:
            yield
        finally:
            self.completed += 1
            self.running.pop(i, None)


async def cancelled(*tasks: asyncio.Task[object]) -> None:
    """Cancel the tasks, then wait until each has ended."""
    for task in tasks:
        task.cancel()
    for task in tasks:
        with contextlib.suppress(asyncio.CancelledError):
            await task


@dataclass
class Plan:
    """One open-loop cell: `bodies[i]` sent at `offsets[i]` (s after the start), cancelled and
    unfinished `deadline_s` after it or at `stop`; `on_done(i, exchange)` as each ends, and
    `watch()` beside them until they have ended."""

    bodies: Sequence[object]
    offsets: Sequence[float]
    deadline_s: float
    timeout_s: float | None = None
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    flight: Flight = field(default_factory=Flight)
    on_done: Callable[[int, Exchange], None] | None = None
    watch: Callable[[], Coroutine[object, object, None]] | None = None

    def __post_init__(self) -> None:
        if len(self.bodies) != len(self.offsets):
            raise ValueError(f"{len(self.bodies)} bodies for {len(self.offsets)} send times")

    @contextlib.asynccontextmanager
    async def watched(self) -> AsyncIterator[None]:
        """The block with `watch()` running beside it; `stop` set, and the watch ended, after."""
        watching = asyncio.create_task(self.watch()) if self.watch is not None else None
        try:
            yield
        finally:
            if watching is not None:
                self.stop.set()
                with contextlib.suppress(asyncio.CancelledError):
                    await watching


async def send(client: Client, plan: Plan) -> OpenLoopRun:
    """Send `plan`'s requests, each at its time, never waiting on an answer to send the next."""
    async with plan.watched():
        sent = [Sent(float(o)) for o in plan.offsets]
        oversleep: list[float] = []
        stop = plan.stop
        tick = asyncio.create_task(_ticker(oversleep))
        halt = asyncio.create_task(stop.wait())
        t0 = time.perf_counter()

        async def one(i: int) -> None:
            sent[i].sent_s = time.perf_counter() - t0  # until the exchange says when it went out
            with plan.flight.one(i):
                ex = await client.stream(CHAT, plan.bodies[i], plan.timeout_s)
            sent[i].exchange = ex
            sent[i].sent_s = ex.t_sent - t0
            if plan.on_done is not None:
                plan.on_done(i, ex)

        tasks: dict[int, asyncio.Task[None]] = {}
        try:
            for i, off in enumerate(sent):
                delay = t0 + off.planned_s - time.perf_counter()
                if delay > 0:
                    await asyncio.wait([halt], timeout=delay)
                if stop.is_set():
                    break
                tasks[i] = asyncio.create_task(one(i))
            # every request sent (or `stop` set): wait for them until the deadline or `stop`,
            # cancel those still running, and mark them and the unsent ones unfinished
            pending: set[asyncio.Task[object]] = set(tasks.values())
            end, limit = t0 + plan.deadline_s, plan.deadline_s
            while pending and not stop.is_set() and (left := end - time.perf_counter()) > 0:
                done, _ = await asyncio.wait({*pending, halt}, timeout=left, return_when=FIRST)
                pending -= done
            why = (
                "stopped early"
                if stop.is_set()
                else f"still running {limit:g} s after the cell began"
            )
            await cancelled(*pending)
            for i, s in enumerate(sent):
                if i not in tasks:
                    s.unfinished = "never sent: stopped early"
                elif tasks[i] in pending:
                    s.unfinished = why
            return OpenLoopRun(sent, t0, window(sent, time.perf_counter() - t0), oversleep)
        finally:
            for task in tasks.values():
                task.cancel()
            await cancelled(tick, halt)
