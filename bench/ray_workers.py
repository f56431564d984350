"""Open-loop load from one process against N Ray workers (`qualify.capacity.rayload`): whether
the senders keep a schedule one process cannot, and the SSE events per second each setup
delivers.

Starts `bench/sse_emitter.py` in its own process and a local Ray cluster (`ray start --head`,
one node, `--num-cpus` the most workers asked for, so the placement is SPREAD on one host), then
sends the same seeded Poisson schedule (`--rate` req/s for `--seconds`, each request a stream of
`--events` SSE events `--interval-ms` apart) from one process (`openloop.send`) and over each
`--workers` count (`RayFleet.send`), `--repeats` times each. Per setup and repeat: the worst
send lag at p99 (over the workers: each keeps its own), the harness verdict under the house's
default `client_max_lag_ms`, the events delivered per second (requests answered whole x events
over the cell's window) and the workers' CPU seconds. Then, per setup, the median and range of
those over the repeats.

    .venv/bin/python bench/ray_workers.py --rate 200 --workers 1 2 4 8 --repeats 3
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from openloop_lag import start_emitter

from qualify.capacity.openloop import OpenLoopRun, Plan, harness_lag, poisson, send
from qualify.capacity.rayload import RayFleet
from qualify.gates.thresholds import Thresholds
from qualify.httpclient.client import Client
from qualify.serving.process import free_port

BOUND_MS = Thresholds().client_max_lag_ms


def ray_cli(*args: str) -> None:
    ray = shutil.which("ray", path=str(Path(sys.executable).parent)) or "ray"
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    subprocess.run([ray, *args], check=True, capture_output=True, timeout=120, env=env)


def measured(run: OpenLoopRun, events: int, workers: list[dict[str, Any]]) -> dict[str, Any]:
    whole = sum(1 for s in run.sent if s.exchange is not None and s.exchange.ok)
    lags = [run.lag()["send_lag_ms_p99"]] if not workers else []
    lags += [w["lag"]["send_lag_ms_p99"] for w in workers]
    worst = max((v for v in lags if v is not None), default=None)
    return {
        "requests": len(run.sent),
        "whole": whole,
        "lag_p99_ms": worst,
        "harness_error": harness_lag({"send_lag_ms_p99": worst}, BOUND_MS),
        "events_per_s": whole * events / run.window_s if run.window_s else None,
        "cpu_s": sum(w["cpu_s"] for w in workers) if workers else None,
    }


async def one(url: str, fleet: RayFleet | None, args: argparse.Namespace) -> dict[str, Any]:
    n = max(2, round(args.rate * args.seconds))
    offsets = poisson(args.rate, n, seed=7)
    body = {"n": args.events, "interval_s": args.interval_ms / 1000, "pad": 0}
    plan = Plan([body] * n, offsets, offsets[-1] + 60.0, path="/")
    async with Client(url, max_connections=4096) as client:
        if fleet is None:
            return measured(await send(client, plan), args.events, [])
        run = await fleet.send(client, plan)
        return measured(run, args.events, run.spread["workers"])


def summary(setup: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "setup": setup,
        "kept_schedule": sum(not r["harness_error"] for r in rows),
    }
    for key in ("lag_p99_ms", "events_per_s", "cpu_s"):
        xs = [r[key] for r in rows if r[key] is not None]
        if xs:
            out[key] = {"median": statistics.median(xs), "min": min(xs), "max": max(xs)}
    out["repeats"] = len(rows)
    return out


async def main(args: argparse.Namespace) -> None:
    port = free_port()
    emitter = start_emitter(port)
    url = f"http://127.0.0.1:{port}"
    tmp = tempfile.mkdtemp(prefix="rb-", dir="/tmp")  # Ray's socket paths must stay short
    head = free_port()
    try:
        ray_cli(
            "start", "--head", "--port", str(head), "--num-cpus", str(max(args.workers)),
            "--include-dashboard", "false", "--disable-usage-stats", "--temp-dir", tmp,
            "--node-ip-address", "127.0.0.1",
        )  # fmt: skip
        setups: list[tuple[str, int]] = [("one process", 0)]
        setups += [(f"{n} Ray workers", n) for n in args.workers]
        for name, n in setups:
            fleet = RayFleet.open(f"127.0.0.1:{head}", n, BOUND_MS) if n else None
            rows = []
            try:
                for r in range(args.repeats):
                    got = await one(url, fleet, args)
                    print(json.dumps({"setup": name, "repeat": r + 1, **got}), flush=True)
                    rows.append(got)
                    time.sleep(1.0)
            finally:
                if fleet is not None:
                    await fleet.close()
            print(json.dumps(summary(name, rows)), flush=True)
    finally:
        ray_cli("stop", "--force")
        emitter.terminate()
        emitter.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rate", type=float, default=100.0)
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--events", type=int, default=64)
    p.add_argument("--interval-ms", type=float, default=10.0)
    p.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    p.add_argument("--repeats", type=int, default=3)
    asyncio.run(main(p.parse_args()))
