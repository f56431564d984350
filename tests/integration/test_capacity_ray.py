"""Open-loop cells on Ray workers (`qualify.capacity.spread`), on a real local Ray cluster of two
nodes started here (`raycluster.local_cluster`), against the local SSE emitter
(`bench/sse_emitter.py`, in its own process): the transport, the clocks, the split schedule,
a worker that falls behind and a worker killed mid-cell. The whole stage on Ray against the real
llama-server is `test_capacity_ray_stage.py`.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from raycluster import local_cluster

from qualify.capacity.openloop import OpenLoopRun, Plan, poisson, send
from qualify.capacity.spread import SpreadRun, annotate
from qualify.httpclient.client import Client
from qualify.serving.process import free_port

rayload = pytest.importorskip("qualify.capacity.rayload")

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
N = 40
RATE = 20.0
SEED = 11
BOUND_MS = 200.0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with local_cluster(tmp_path_factory.mktemp("ray")) as address:
        yield address


@pytest.fixture(scope="module")
def emitter() -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "bench" / "sse_emitter.py"), "--port", str(port)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and "listening" in proc.stdout.readline()
    yield f"http://127.0.0.1:{port}"
    proc.terminate()
    proc.wait(10)
    proc.stdout.close()


def bodies(n: int = N, events: int = 20) -> list[dict[str, Any]]:
    # Each request streams `events` events 5 ms apart (~0.1 s); `i` names it in the evidence.
    return [{"n": events, "interval_s": 0.005, "pad": 40, "i": i} for i in range(n)]


async def single(url: str, offsets: list[float]) -> OpenLoopRun:
    async with Client(url) as client:
        return await send(client, Plan(bodies(len(offsets)), offsets, offsets[-1] + 10))


async def spread(
    url: str, address: str, offsets: list[float], during: Any = None, **kw: Any
) -> tuple[SpreadRun, Any]:
    fleet = rayload.RayFleet.open(address, 2, kw.pop("bound_ms", 50.0))
    try:
        async with Client(url) as client:
            task = asyncio.ensure_future(
                fleet.send(client, Plan(bodies(len(offsets)), offsets, offsets[-1] + 10))
            )
            if during is not None:
                await during(fleet)
            run = await task
            after = await fleet.send(client, Plan(bodies(2), [0.0, 0.1], 5.0))
        return run, after
    finally:
        await fleet.close()


def test_merged_sends_equal_one_process(cluster: str, emitter: str) -> None:
    """Two workers, one per node (STRICT_SPREAD), split the one schedule by index: the merged
    requests equal one process's in count and in the order of their sends, every answer comes
    back whole, and each worker's clock offset is measured from its probes and kept."""
    offsets = poisson(RATE, N, SEED)
    one = asyncio.run(single(emitter, offsets))
    run, _ = asyncio.run(spread(emitter, cluster, offsets))
    assert len(run.sent) == len(one.sent) == N
    assert [s.planned_s for s in run.sent] == [s.planned_s for s in one.sent]
    assert all(s.exchange is not None and s.exchange.ok for s in run.sent)
    assert [s.exchange.request_body["i"] for s in run.sent if s.exchange] == list(range(N))
    # sends in the schedule's order, wherever two planned sends are 20 ms or more apart
    for a, b in zip(run.sent, run.sent[1:], strict=False):
        if b.planned_s - a.planned_s >= 0.02:
            assert a.sent_s is not None and b.sent_s is not None and a.sent_s < b.sent_s
    workers = run.spread["workers"]
    assert run.spread["placement"] == "STRICT_SPREAD"
    assert len({w["node"] for w in workers}) == 2
    assert [w["requests"] for w in workers] == [N // 2, N // 2]
    for w in workers:
        assert len(w["probes"]) == rayload.PROBES
        assert w["uncertainty_ms"] is not None and 0 < w["uncertainty_ms"] < 50
        # one host, one CLOCK_MONOTONIC: the measured offset is zero within its uncertainty
        assert abs(w["offset_ms"]) <= w["uncertainty_ms"] + 1.0
        assert w["lag"]["send_lag_ms_p99"] < BOUND_MS and w["cpu_s"] > 0
        print(
            f"worker {w['worker']} node {w['node'][:8]}: offset {w['offset_ms']:.3f} ms "
            f"± {w['uncertainty_ms']:.3f} ms, start late {w['start_late_ms']:.3f} ms, "
            f"lag p99 {w['lag']['send_lag_ms_p99']:.2f} ms, cpu {w['cpu_s']:.3f} s"
        )
    cell = annotate({"harness_error": None}, run, BOUND_MS)
    assert cell["harness_error"] is None and cell["spread"] is run.spread
    print(f"one process lag p99 {one.lag().send_lag_ms_p99:.2f} ms; on Ray {run.lag()}")


def test_a_worker_behind_fails_the_cell_naming_it(cluster: str, emitter: str) -> None:
    """Worker 2's event loop is blocked for 1.5 s mid-cell: its own send lag passes the house's
    bound, and the cell is a harness error naming worker 2 and its node."""

    async def stall(fleet: Any) -> None:
        await asyncio.sleep(rayload.LEAD_S + 0.3)
        await fleet.actors[1].stall.remote(1.5)

    offsets = poisson(RATE, N, SEED)
    run, _ = asyncio.run(spread(emitter, cluster, offsets, stall))
    w1, w2 = run.spread["workers"]
    assert w2["lag"]["send_lag_ms_p99"] > BOUND_MS > w1["lag"]["send_lag_ms_p99"]
    cell = annotate({"harness_error": None}, run, BOUND_MS)
    assert cell["harness_error"].startswith(f"worker 2 on node {w2['node'][:8]}")
    assert "fell behind" in cell["harness_error"]
    assert all(s.exchange is not None for s in run.sent)  # late, not lost


def test_an_uncertain_clock_sends_nothing(cluster: str, emitter: str) -> None:
    """A bound no probe can meet: the cell is a harness error before any request is sent, its
    probes kept."""
    offsets = poisson(RATE, 6, SEED)
    run, _ = asyncio.run(spread(emitter, cluster, offsets, bound_ms=0.001))
    assert run.harness and "clock uncertainty" in run.harness
    assert all(s.exchange is None and s.unfinished for s in run.sent)
    assert all(len(w["probes"]) == rayload.PROBES for w in run.spread["workers"])


def test_a_worker_killed_mid_cell_aborts_the_cell(cluster: str, emitter: str) -> None:
    """Worker 1's process is killed mid-cell: the cell is aborted as a harness error naming it,
    worker 2 is stopped, every exchange that came back is kept, the rest are unfinished and
    named, and the fleet sends nothing more."""

    async def kill(fleet: Any) -> None:
        await asyncio.sleep(rayload.LEAD_S + 0.5)
        os.kill(fleet.wheres[0]["pid"], signal.SIGKILL)

    offsets = poisson(RATE, N, SEED)
    t0 = time.monotonic()
    run, after = asyncio.run(spread(emitter, cluster, offsets, kill))
    assert time.monotonic() - t0 < 60
    assert run.harness and run.harness.startswith("worker 1 on node")
    assert "lost mid-cell" in run.harness
    cell = annotate({"harness_error": None}, run, BOUND_MS)
    assert cell["harness_error"] == run.harness
    kept = [s for s in run.sent if s.exchange is not None]
    assert 0 < len(kept) < N
    assert all(s.unfinished for s in run.sent if s.exchange is None)
    lost = [s for i, s in enumerate(run.sent) if i % 2 == 0 and s.exchange is None]
    assert lost and all("worker 1 lost" in (s.unfinished or "") for s in lost)
    assert run.spread["workers"][0]["lost"]
    assert after.harness == run.harness and all(s.exchange is None for s in after.sent)
