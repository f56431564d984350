"""Open-loop cells past one machine: the load of each cell sent by N Ray workers
(`[stages.capacity.load] workers`; `qualify.capacity.rayload`). This module is the driver's side
and needs no Ray: without the `qualify[ray]` extra, or with N = 1, nothing runs differently
(`chosen` hands back the one-process sender). One seeded schedule split by index, clocks aligned
by probes, every raw record merged here (a summary is never merged: a p95 of p95s is no p95), and
each worker's own lag judged: docs/capacity.md, "Load past one machine: Ray workers"."""

from __future__ import annotations

import contextvars
import os
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, TypeVar

from qualify.capacity.loads import Spread
from qualify.capacity.openloop import OpenLoopRun, Plan, Sent, harness_lag
from qualify.httpclient.client import Client, Exchange

if TYPE_CHECKING:
    from qualify.capacity.shard import ShardResult
    from qualify.capacity.stage import Capacity
    from qualify.gates.thresholds import Thresholds

ENV = "QUALIFY_RAY_ADDRESS"
PROBES = 8
LEAD_S = 1.0  # the start is broadcast this far ahead of the driver's clock
T = TypeVar("T")


class Fleet(Protocol):
    """Sends one cell's requests as `openloop.send` does, over workers."""

    async def send(self, client: Client, cell: Plan) -> OpenLoopRun: ...

    async def close(self) -> None: ...


FLEET: contextvars.ContextVar[Fleet | None] = contextvars.ContextVar("fleet", default=None)


Send = Callable[[Client, Plan], Awaitable[OpenLoopRun]]


def chosen(send: Send) -> Send:
    """The sender of an open-loop cell: the Ray fleet's while one is open, else `send`."""
    fleet = FLEET.get()
    return send if fleet is None else fleet.send


def address(setting: str | None) -> str:
    return os.environ.get(ENV) or setting or "auto"


async def around(cap: Capacity, work: Awaitable[T]) -> T:
    """`work` (the stage's loads) with a fleet of `cap.s.load.workers` Ray workers open."""
    s = cap.s.load
    if s.workers <= 1:
        return await work
    fleet = open_fleet(address(s.ray_address), s.workers, cap.ctx.thresholds)
    token = FLEET.set(fleet)
    try:
        return await work
    finally:
        FLEET.reset(token)
        await fleet.close()


def open_fleet(where: str, workers: int, thresholds: Thresholds) -> Fleet:
    """The Ray fleet, or a broken one that makes every cell a harness error saying why."""
    bound = float(thresholds.client_max_clock_uncertainty_ms)
    try:
        from qualify.capacity.rayload import RayFleet
    except ImportError as exc:
        return Broken(where, f"workers = {workers} needs Ray (pip install 'qualify[ray]'): {exc}")
    try:
        return RayFleet.open(where, workers, bound)
    except Exception as exc:  # any failure to reach or fill the cluster, said in the cell
        return Broken(where, f"no {workers} Ray workers at {where}: {type(exc).__name__}: {exc}")


@dataclass
class SpreadRun(OpenLoopRun):
    """An open-loop run over workers: the union of their requests in the schedule's order, how
    each ran (`spread`, the record's `Spread`), and why it is a harness error, if it is."""

    spread: dict[str, object] = field(default_factory=dict)  # the record's `Spread`, as written
    harness: str | None = None


def never_sent(offsets: list[float], why: str, spread: dict[str, object]) -> SpreadRun:
    sent = [Sent(float(o), unfinished=f"never sent: {why}") for o in offsets]
    return SpreadRun(sent, 0.0, None, spread=spread, harness=why)


@dataclass
class Broken:
    """A fleet that could not be opened: each cell sends nothing and is a harness error."""

    where: str
    why: str

    async def send(self, client: Client, cell: Plan) -> SpreadRun:
        return never_sent(list(cell.offsets), self.why, {"address": self.where, "workers": []})

    async def close(self) -> None:
        return None


def shard_name(run: OpenLoopRun, name: str, i: int) -> str:
    """The kept name of request `i` (from 0) of a cell: its worker's shard when it ran on Ray."""
    n = len(Spread.model_validate(run.spread).workers) if isinstance(run, SpreadRun) else 0
    return name if n < 2 else shard_label(name, i, n)


def shard_label(name: str, i: int, n: int) -> str:
    """`load-poisson-2rps-s5` of worker 1 of 2 -> `load-poisson-2rps-w1-s5`."""
    head, _, tail = name.rpartition("-s")
    return f"{head}-w{i % n + 1}-s{tail}"


def best_probe(probes: list[dict[str, float]]) -> tuple[float, float]:
    """(offset, uncertainty) in seconds from the probe of least round trip: the worker's clock
    minus the driver's at that probe's midpoint, and half its round trip."""
    p = min(probes, key=lambda p: p["back_s"] - p["sent_s"])
    return p["worker_s"] - (p["sent_s"] + p["back_s"]) / 2, (p["back_s"] - p["sent_s"]) / 2


def node_text(w: Mapping[str, object]) -> str:
    host = f" ({w['host']})" if w.get("host") else ""
    return f"worker {w['worker']} on node {str(w.get('node') or '?')[:8]}{host}"


def annotate(cell: dict[str, object], run: OpenLoopRun, lag_bound_ms: float) -> dict[str, object]:
    """A cell that ran on workers: its `spread`, and its harness error when a worker was lost,
    its clock was uncertain or it fell behind (named), before the union's own lag."""
    if not isinstance(run, SpreadRun):
        return cell
    cell["spread"] = run.spread
    why = run.harness
    for w in Spread.model_validate(run.spread).workers:
        behind = harness_lag(w.lag, lag_bound_ms)
        if why is None and behind is not None:
            why = f"{node_text(w.model_dump())} fell behind: {behind}"
    if why is not None:
        cell["harness_error"] = why
    return cell


@dataclass
class Worker:
    """The driver's view of one worker over one cell."""

    k: int  # from 0
    where: dict[str, object]
    indices: list[int]
    probes: list[dict[str, float]] = field(default_factory=list)
    result: ShardResult | None = None
    lost: str | None = None

    def evidence(self, sent: list[Sent]) -> dict[str, object]:
        offset, unc = best_probe(self.probes) if self.probes else (None, None)
        r = self.result
        mine = [sent[i] for i in self.indices]
        return {
            "worker": self.k + 1,
            "node": self.where.get("node", ""),
            "host": self.where.get("host", ""),
            "requests": len(self.indices),
            "offset_ms": None if offset is None else round(offset * 1000, 3),
            "uncertainty_ms": None if unc is None else round(unc * 1000, 3),
            "probes": [{k: round(v, 6) for k, v in p.items()} for p in self.probes],
            "start_late_ms": None if r is None else round(r.start_late_s * 1000, 3),
            "lag": OpenLoopRun(mine, 0.0, None, r.oversleep_ms if r else []).lag().model_dump(),
            "cpu_s": None if r is None else round(r.cpu_s, 3),
            "lost": self.lost,
        }


def merge(
    offsets: list[float],
    workers: list[Worker],
    received: dict[int, Exchange],
    start: float,
) -> list[Sent]:
    """The union of the workers' requests in the schedule's order, with every exchange that came
    back; a lost worker's requests that never came back are unfinished, named."""
    sent = [Sent(float(o)) for o in offsets]
    for w in workers:
        r = w.result
        for k, i in enumerate(w.indices):
            s = sent[i]
            s.exchange = received.get(i)
            if r is not None:
                s.sent_s, s.unfinished = r.sent_s[k], r.unfinished[k]
            elif s.exchange is not None:
                s.sent_s = s.exchange.t_sent - start
            else:
                s.unfinished = f"worker {w.k + 1} lost mid-cell: {w.lost}"
            if s.exchange is not None:
                s.unfinished = None
    return sent
