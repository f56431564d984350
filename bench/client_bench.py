"""How fast `qualify.httpclient.client.Client.stream` parses and timestamps SSE, and how exactly.

Starts `bench/sse_emitter.py` in another process (its CPU is not counted), then:

- fast: S concurrent streams of N events each, sent as fast as the sockets take them; reports
  events per second parsed and timestamped by this one process and CPU time per event.
- schedule: S concurrent streams at a fixed total rate; reports the timestamp error (recorded
  arrival minus the emitter's write time, both CLOCK_MONOTONIC) at p50 and p99.

    .venv/bin/python bench/client_bench.py                     # the goals' configurations
    .venv/bin/python bench/client_bench.py --profile fast.prof # cProfile of the fast run
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

from qualify.httpclient.client import Client, Exchange
from qualify.httpclient.timing import percentile

HERE = Path(__file__).resolve().parent


def cpu_s() -> float:
    """User + system CPU of this process (the emitter is another process)."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def proc_cpu_s(pid: int) -> float:
    """User + system CPU of another process, from /proc (to check the emitter kept up)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_emitter(port: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "sse_emitter.py"), "--port", str(port)],
        stdout=subprocess.PIPE,
    )
    assert proc.stdout is not None
    proc.stdout.readline()  # "listening on ..."
    return proc


async def run(client: Client, streams: int, body: dict[str, float]) -> list[Exchange]:
    return list(await asyncio.gather(*(client.stream("/sse", body) for _ in range(streams))))


def count(exchanges: list[Exchange]) -> int:
    bad = [ex.error for ex in exchanges if not ex.ok]
    if bad:
        raise SystemExit(f"stream failed: {bad[0]}")
    return sum(len(ex.events) - 1 for ex in exchanges)  # less the [DONE] event


async def fast(
    client: Client, streams: int, n: int, profile: str | None, emitter: int
) -> dict[str, float]:
    await run(client, streams, {"n": 10})  # connections opened, code paths warm
    prof = cProfile.Profile() if profile else None
    c0, w0, e0 = cpu_s(), time.perf_counter(), proc_cpu_s(emitter)
    if prof:
        prof.enable()
    exchanges = await run(client, streams, {"n": n})
    if prof:
        prof.disable()
        prof.dump_stats(profile)
    wall, cpu = time.perf_counter() - w0, cpu_s() - c0
    emitter_share = (proc_cpu_s(emitter) - e0) / wall
    events = count(exchanges)
    chunks = sum(len(ex.chunk_times) for ex in exchanges)
    return {
        "streams": streams,
        "events": events,
        "events_per_s": events / wall,
        "cpu_us_per_event": cpu * 1e6 / events,
        "events_per_read": events / chunks,
        "cpu_share": cpu / wall,
        "emitter_cpu_share": emitter_share,
    }


async def schedule(client: Client, streams: int, rate: float, seconds: float) -> dict[str, float]:
    per_stream = int(rate * seconds / streams)
    await run(client, streams, {"n": 10})
    c0 = cpu_s()
    exchanges = await run(client, streams, {"n": per_stream, "interval_s": streams / rate})
    cpu = cpu_s() - c0
    events = count(exchanges)
    errors_ms = []
    for ex in exchanges:
        for ev in ex.events[:-1]:
            t_send = json.loads(ev.data)["t_send"]
            errors_ms.append((ex.t_sent + ev.t - t_send) * 1000.0)
    return {
        "streams": streams,
        "rate": rate,
        "events": events,
        "error_p50_ms": percentile(errors_ms, 50) or 0.0,
        "error_p99_ms": percentile(errors_ms, 99) or 0.0,
        "error_max_ms": max(errors_ms),
        "cpu_us_per_event": cpu * 1e6 / events,
    }


async def main(args: argparse.Namespace) -> None:
    emitter = start_emitter(args.port)
    try:
        async with Client(f"http://127.0.0.1:{args.port}", max_connections=64) as client:
            print(f"load before: {Path('/proc/loadavg').read_text().split()[:3]}")
            for s in args.fast_streams:
                print(
                    "fast",
                    json.dumps(await fast(client, s, args.events, args.profile, emitter.pid)),
                )
            for s in args.schedule_streams:
                r = await schedule(client, s, args.rate, args.seconds)
                print("schedule", json.dumps(r))
            print(f"load after: {Path('/proc/loadavg').read_text().split()[:3]}")
    finally:
        emitter.terminate()
        emitter.wait()


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=18510)
    ap.add_argument("--fast-streams", type=int, nargs="*", default=[8, 64])
    ap.add_argument("--events", type=int, default=4000, help="events per stream, fast mode")
    ap.add_argument("--schedule-streams", type=int, nargs="*", default=[1, 8, 64])
    ap.add_argument("--rate", type=float, default=5000.0, help="events/s in all, schedule mode")
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--profile", help="write a cProfile of the fast runs here")
    os.environ.setdefault("PYTHONHASHSEED", "0")
    asyncio.run(main(ap.parse_args()))
