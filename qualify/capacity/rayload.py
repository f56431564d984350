"""The Ray side of open-loop cells over workers (`qualify.capacity.spread` says what and why,
docs/capacity.md "Load past one machine: Ray workers" how): `RayFleet.send` has the signature
of `qualify.capacity.openloop.send`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import ray
from ray.util.placement_group import PlacementGroup, placement_group, remove_placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

import qualify
from qualify.capacity.openloop import Plan, Sent, window
from qualify.capacity.shard import Polled, Shard, ShardResult, ShardSpec, split
from qualify.capacity.spread import (
    LEAD_S,
    PROBES,
    SpreadRun,
    Worker,
    best_probe,
    merge,
    never_sent,
    node_text,
)
from qualify.httpclient.client import Client, Exchange

POLL_S = 0.2
READY_S = 60.0  # for the placement group and the actors
GRACE_S = 30.0  # past a cell's deadline, a worker that has not answered is lost
WORKER_CPUS = float(os.environ.get("QUALIFY_RAY_WORKER_CPUS", "1"))


@ray.remote(max_concurrency=64)  # type: ignore[call-overload]
class LoadWorker(Shard):
    """One worker: qualify's open-loop sender and HTTP client on its node (its `Shard` runs,
    polls, halts and closes; every method a coroutine, so all run on the actor's one loop)."""

    async def where(self) -> dict[str, object]:
        ctx = ray.get_runtime_context()
        return {"node": ctx.get_node_id(), "host": socket.gethostname(), "pid": os.getpid()}

    async def clock(self) -> float:
        return time.perf_counter()

    async def stall(self, seconds: float) -> None:
        """Block this worker's event loop (a worker starved of CPU): the lag check's proof."""
        time.sleep(seconds)


@dataclass
class RayFleet:
    """N `LoadWorker`s in one placement group, each cell sent over them."""

    where: str
    actors: list[Any]  # Ray actor handles of `LoadWorker` (untyped: `.remote()` calls)
    wheres: list[dict[str, object]]
    pg: PlacementGroup | None = None
    placement: str = ""
    joined: bool = False  # this process joined the cluster (and leaves it on close)
    bound_ms: float = 20.0
    broken: str | None = None

    @classmethod
    def open(cls, where: str, workers: int, bound_ms: float) -> RayFleet:
        joined = not ray.is_initialized()
        if joined:
            pkg = os.path.dirname(qualify.__file__)
            ray.init(
                address=where,
                runtime_env={"py_modules": [pkg]},
                log_to_driver=False,
                logging_level=logging.WARNING,
            )
        nodes = [n for n in ray.nodes() if n.get("Alive")]  # type: ignore[no-untyped-call]
        strategy = "STRICT_SPREAD" if len(nodes) >= workers else "SPREAD"
        pg = placement_group([{"CPU": WORKER_CPUS}] * workers, strategy=strategy)
        ray.get(pg.ready(), timeout=READY_S)
        actors = [
            LoadWorker.options(  # type: ignore[attr-defined]
                num_cpus=WORKER_CPUS,
                scheduling_strategy=PlacementGroupSchedulingStrategy(
                    pg, placement_group_bundle_index=k
                ),
            ).remote()
            for k in range(workers)
        ]
        wheres = ray.get([a.where.remote() for a in actors], timeout=READY_S)
        return cls(where, actors, wheres, pg, strategy, joined, bound_ms)

    async def probe(self, actor: Any) -> list[dict[str, float]]:  # a `LoadWorker` handle
        out = []
        for _ in range(PROBES):
            t0 = time.perf_counter()
            w = await actor.clock.remote()
            out.append({"sent_s": t0, "worker_s": float(w), "back_s": time.perf_counter()})
        return out

    def spread(self, workers: list[Worker], sent: list[Sent]) -> dict[str, object]:
        evidence = [w.evidence(sent) for w in workers]
        uncs = [u for e in evidence if isinstance(u := e["uncertainty_ms"], float)]
        return {
            "address": self.where,
            "placement": self.placement,
            "start_lead_s": LEAD_S,
            "uncertainty_ms": max(uncs) if uncs else None,
            "uncertainty_bound_ms": self.bound_ms,
            "workers": evidence,
        }

    async def send(self, client: Client, cell: Plan) -> SpreadRun:
        """One cell over the workers (the module docstring); `openloop.send`'s contract."""
        async with cell.watched():
            plan = [float(o) for o in cell.offsets]
            shares = split(len(plan), len(self.actors))
            workers = [Worker(k, self.wheres[k], idx) for k, idx in enumerate(shares)]
            planned = [Sent(o) for o in plan]
            if self.broken:
                return never_sent(plan, self.broken, self.spread(workers, planned))
            calls = (self.probe(self.actors[w.k]) for w in workers)
            probed = await asyncio.gather(*calls, return_exceptions=True)
            for w, probes in zip(workers, probed, strict=True):
                w.probes, w.lost = (
                    (probes, None) if isinstance(probes, list) else ([], _why(probes))
                )
            if why := self._unfit(workers):
                return never_sent(plan, why, self.spread(workers, planned))
            start = time.perf_counter() + LEAD_S
            specs = [
                ShardSpec(
                    indices=w.indices,
                    bodies=[cell.bodies[i] for i in w.indices],
                    offsets=[plan[i] for i in w.indices],
                    start_s=start,
                    offset_s=best_probe(w.probes)[0],
                    deadline_s=cell.deadline_s,
                    base_url=client.base_url,
                    api_key=client.api_key,
                    client_timeout_s=client.timeout_s,
                    timeout_s=cell.timeout_s,
                )
                for w in workers
            ]
            received = await self._drive(workers, specs, start, cell)
            sent = merge(plan, workers, received, start)
            run = SpreadRun(sent, start, window(sent, time.perf_counter() - start))
            run.oversleep_ms = [x for w in workers if w.result for x in w.result.oversleep_ms]
            run.spread = self.spread(workers, sent)
            lost = [w for w in workers if w.lost]
            if lost:
                run.harness = f"{node_text(lost[0].evidence(sent))} was lost mid-cell "
                run.harness += f"({lost[0].lost}): the cell is aborted, what came back is kept"
                self.broken = run.harness
            return run

    def _unfit(self, workers: list[Worker]) -> str | None:
        for w in workers:
            where = node_text(w.where | {"worker": w.k + 1})
            if w.lost:
                return f"{where} is lost: {w.lost}"
            _, unc = best_probe(w.probes)
            if unc * 1000 > self.bound_ms:
                return (
                    f"clock uncertainty of {where}: {unc * 1000:.1f} ms > "
                    f"{self.bound_ms:g} ms (half its best probe's round trip)"
                )
        return None

    async def _drive(
        self, workers: list[Worker], specs: list[ShardSpec], start: float, cell: Plan
    ) -> dict[int, Exchange]:
        """Run every share; poll for ended exchanges; stop all at an early stop or a loss."""
        stop, flight, on_done, deadline_s = cell.stop, cell.flight, cell.on_done, cell.deadline_s
        received: dict[int, Exchange] = {}

        def got(done: list[tuple[int, Exchange]]) -> None:
            for i, ex in done:
                received[i] = ex
                if on_done is not None:
                    on_done(i, ex)

        runs = {
            w.k: asyncio.ensure_future(self.actors[w.k].run.remote(s))
            for w, s in zip(workers, specs, strict=True)
        }
        latest: dict[int, Polled] = {}
        halted = False
        while any(not f.done() for f in runs.values()):
            await asyncio.sleep(POLL_S)
            latest |= await self._poll([w for w in workers if not runs[w.k].done()], got)
            if polls := list(latest.values()):  # what is in flight, for the cell's watch
                flight.started = max(flight.started, sum(p.started for p in polls))
                flight.completed = max(flight.completed, sum(p.completed for p in polls))
                flight.running = {i: t for p in polls for i, t in p.running.items()}
            for w in workers:
                f = runs[w.k]
                if f.done() and w.result is None and w.lost is None:
                    w.result, w.lost = _outcome(f)
                if f.done() and w.k in latest:
                    latest[w.k].running = {}
            late = time.perf_counter() - start > deadline_s + GRACE_S
            if late:
                for w in workers:
                    if not runs[w.k].done():
                        w.lost = f"no answer {GRACE_S:g} s past the cell's deadline"
                        runs[w.k].cancel()
            if (stop.is_set() or any(w.lost for w in workers)) and not halted:
                halted = True
                await self._halt(workers)
            if late:
                break
        for w in workers:
            f = runs[w.k]
            if w.result is None and w.lost is None and f.done():
                w.result, w.lost = _outcome(f)
            if w.result is not None:
                got(w.result.done)
        return received

    async def _poll(
        self, workers: list[Worker], got: Callable[[list[tuple[int, Exchange]]], None]
    ) -> dict[int, Polled]:
        out = {}
        for w in workers:
            try:
                p: Polled = await self.actors[w.k].poll.remote()
            except Exception as exc:  # the actor or its node is gone: its run says so too
                w.lost = w.lost or _why(exc)
                continue
            got(p.done)
            out[w.k] = p
        return out

    async def _halt(self, workers: list[Worker]) -> None:
        for w in workers:
            if not w.lost:
                try:
                    await self.actors[w.k].halt.remote()
                except Exception as exc:
                    w.lost = _why(exc)

    async def close(self) -> None:
        for a in self.actors:
            with contextlib.suppress(Exception):  # a lost worker has nothing to close
                await asyncio.wait_for(a.close.remote(), 10)
            ray.kill(a)
        if self.pg is not None:
            remove_placement_group(self.pg)
        if self.joined:
            ray.shutdown()


def _outcome(f: asyncio.Future[ShardResult]) -> tuple[ShardResult | None, str | None]:
    if f.cancelled():
        return None, "cancelled"
    exc = f.exception()
    if exc is not None:
        return None, _why(exc)
    return f.result(), None


def _why(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0][:200]}"
