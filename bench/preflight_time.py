"""How long the demo candidate's preflight takes, both reasoning levels, on this machine.

Copies `examples/smollm2/candidate.toml` to a temporary directory with `run = ["identity",
"preflight"]` on a port the OS picks, launches its llama-server through qualify's own lanes,
and times the preflight stage alone (server start excluded), per level and per gate. Prints a
table and the load average, since the 2 cores may be shared.

    .venv/bin/python bench/preflight_time.py            # once
    .venv/bin/python bench/preflight_time.py --runs 3   # median of three
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import statistics
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from qualify.evidence.store import EvidenceStore
from qualify.pipeline import Runner, plan
from qualify.progress import Progress
from qualify.records import StageResult
from qualify.serving.process import stop_all

ROOT = Path(__file__).resolve().parent.parent
PORT = "{port}"  # picked free by the OS at launch


def candidate(tmp: Path) -> Path:
    text = (ROOT / "examples" / "smollm2" / "candidate.toml").read_text().replace("8091", PORT)
    text = re.sub(r"(?m)^run = \[.*\]$", 'run = ["identity", "preflight"]', text)
    (tmp / "candidate.toml").write_text(text)
    (tmp / "control.toml").write_text((ROOT / "examples" / "smollm2" / "control.toml").read_text())
    return tmp / "candidate.toml"


async def once(path: Path, evidence: Path) -> tuple[float, StageResult]:
    p = plan(path)
    run = EvidenceStore(evidence).new_run(p.loaded.candidate.name)
    (run.path / "run.json").write_text("{}")
    runner = Runner(p, run, Progress(quiet=True))
    try:
        await runner.lanes.use("candidate")  # start the server before the clock starts
        t0 = time.perf_counter()
        result = await runner.run_stage("preflight")
        return time.perf_counter() - t0, result
    finally:
        await runner.lanes.stop()


def report(took: list[float], result: StageResult, load0: float) -> None:
    per_level: dict[str, float] = defaultdict(float)
    for g in result.gates:
        per_level[g.level or "-"] += sum(a.metrics.get("wall_s", 0.0) for a in g.attempts)
    print(
        f"preflight wall time: {', '.join(f'{t:.1f}' for t in took)} s "
        f"(median {statistics.median(took):.1f} s; 1-min load {load0:.2f} before, "
        f"{os.getloadavg()[0]:.2f} after)"
    )
    for level, secs in per_level.items():
        print(f"  level {level:8} {secs:6.1f} s of requests")
    for g in result.gates:
        secs = sum(a.metrics.get("wall_s", 0.0) for a in g.attempts)
        print(f"  {g.key:40} {g.verdict.value:12} {secs:6.2f} s  {len(g.attempts)} attempt(s)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=1)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = candidate(Path(tmp))
        took, last = [], None
        load0 = os.getloadavg()[0]
        try:
            for _ in range(args.runs):
                secs, last = asyncio.run(once(path, Path(tmp) / "evidence"))
                took.append(secs)
                print(f"run {len(took)}: {secs:.1f} s", flush=True)
        finally:
            stop_all()
        assert last is not None
        report(took, last, load0)


if __name__ == "__main__":
    main()
