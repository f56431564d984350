"""How closely the open-loop sender (`qualify.capacity.openloop.send`) keeps its schedule.

Starts `bench/sse_emitter.py` in another process (its CPU is not counted against the client),
then sends Poisson arrivals at each rate for `--seconds`; every request is a stream of
`--events` SSE events `--interval-ms` apart (a 64-token answer at ~100 tok/s by default). It
reports, per rate, the send lag (actual − planned send time) at p50, p99 and max, the event
loop's oversleep at p99, the peak number of streams in flight, and whether the cell would be a
harness error under the default `client_max_lag_ms`.

    .venv/bin/python bench/openloop_lag.py                      # rates 5, 20, 50, 100, 200
    .venv/bin/python bench/openloop_lag.py --rates 10 40 --seconds 20
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

from qualify.capacity.openloop import Flight, Plan, harness_lag, poisson, send
from qualify.gates.thresholds import Thresholds
from qualify.httpclient.client import Client
from qualify.serving.process import free_port

HERE = Path(__file__).resolve().parent


def start_emitter(port: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "sse_emitter.py"), "--port", str(port)],
        stdout=subprocess.PIPE,
    )
    assert proc.stdout is not None
    if not proc.stdout.readline().startswith(b"listening"):
        proc.kill()
        raise SystemExit("the emitter did not start")
    return proc


async def one_rate(
    url: str, rate: float, seconds: float, events: int, interval_s: float
) -> dict[str, Any]:
    n = max(2, math.ceil(rate * seconds))
    offsets = poisson(rate, n, seed=int(rate * 1000))
    body = {"n": events, "interval_s": interval_s, "pad": 0}
    flight = Flight()
    peak = 0

    async def watch() -> None:
        nonlocal peak
        while True:
            peak = max(peak, flight.in_flight)
            await asyncio.sleep(0.01)

    async with Client(url, max_connections=1024) as c:
        w = asyncio.create_task(watch())
        run = await send(c, Plan([body] * n, offsets, offsets[-1] + 30.0, path="/", flight=flight))
        w.cancel()
    lag = run.lag()
    ok = sum(1 for s in run.sent if s.exchange is not None and s.exchange.ok)
    bound = Thresholds().client_max_lag_ms
    return {
        "rate_rps": rate,
        "requests": n,
        "ok": ok,
        "peak_in_flight": peak,
        **{k: None if v is None else round(v, 2) for k, v in lag.items()},
        "harness_error": harness_lag(lag, bound),
    }


async def main(args: argparse.Namespace) -> None:
    port = free_port()
    emitter = start_emitter(port)
    try:
        for rate in args.rates:
            out = await one_rate(
                f"http://127.0.0.1:{port}", rate, args.seconds, args.events, args.interval_ms / 1000
            )
            print(json.dumps(out), flush=True)
    finally:
        emitter.terminate()
        emitter.wait()


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rates", type=float, nargs="+", default=[5, 20, 50, 100, 200])
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--events", type=int, default=64)
    p.add_argument("--interval-ms", type=float, default=10.0)
    asyncio.run(main(p.parse_args()))
