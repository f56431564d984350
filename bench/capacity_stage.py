"""The capacity stage of a candidate on its real server, timed part by part, with its figures.

Runs only the `capacity` stage (the server launched as the candidate says, stopped after) into
a scratch evidence directory, then prints one JSON summary: the stage's wall time and the time
of each part (per-kind decode, matrix, knee search, burst, soak, from the evidence files'
order), the knee statement, every open-loop cell's rate, goodput and lag, the soak's figures,
the answers judged and broken, and every gate's verdict. Must run under the shared server lock:

    flock /tmp/qualify-server.lock .venv/bin/python bench/capacity_stage.py \\
        examples/smollm2/candidate.toml
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import tempfile
import time
from pathlib import Path
from typing import Any

from qualify.evidence.store import EvidenceStore
from qualify.pipeline import Runner, plan
from qualify.progress import Progress
from qualify.serving.process import stop_all


def parts(attempt: Path) -> dict[str, float]:
    """Seconds between the first and last evidence file of each part (by file time)."""
    spans: dict[str, list[float]] = {}
    for f in attempt.glob("[0-9][0-9][0-9][0-9]-*.json"):
        label = f.name[5:]
        part = (
            "kinds"
            if label.startswith("kind-")
            else "matrix"
            if label.startswith("cap-")
            else "burst"
            if label.startswith("load-burst")
            else "knee"
            if label.startswith("load-")
            else "soak"
            if label.startswith("soak")
            else "other"
        )
        spans.setdefault(part, []).append(f.stat().st_mtime)
    return {k: round(max(v) - min(v), 1) for k, v in spans.items()}


def summary(data: dict[str, Any], gates: list[Any]) -> dict[str, Any]:
    load = data.get("load") or {}
    cells = [
        {
            "cell": c["cell"],
            "requests": c["requests"],
            "good": c["good"],
            "goodput": c["goodput"],
            "goodput_ci95": c["goodput_ci95"],
            "ttft_p95_s": c["at_percentile"]["ttft_s"],
            "e2e_p95_s": c["at_percentile"]["e2e_s"],
            "send_lag_ms_p99": c["lag"]["send_lag_ms_p99"],
            "loop_oversleep_ms_p99": c["lag"]["loop_oversleep_ms_p99"],
            "stopped_early": c.get("stopped_early"),
        }
        for c in load.get("cells", [])
    ]
    soak = load.get("soak") or {}
    return {
        "knee": (load.get("knee") or {}).get("statement"),
        "stopped": (load.get("knee") or {}).get("stopped"),
        "load_wall_s": load.get("wall_s"),
        "cells": cells,
        "soak": {
            k: soak.get(k)
            for k in ("rate_rps", "planned", "completed", "hung", "goodput", "window_s")
        }
        | {"ttft_drift": soak.get("ttft_drift"), "memory": soak.get("memory")},
        "answers": {
            "judged": data["answers"]["judged"],
            "broken": [
                (c["where"], b["problems"]) for c in data["answers"]["cells"] for b in c["broken"]
            ],
        },
        "matrix": [
            {
                k: r.get(k)
                for k in ("cell", "aggregate_output_tok_s", "ttft_p95_s", "goodput", "requests")
            }
            for r in data["matrix"]
        ],
        "gates": {g.gate: g.verdict.value for g in gates},
    }


async def one(candidate: Path, out: Path) -> dict[str, Any]:
    p = plan(candidate)
    run = EvidenceStore(out).new_run(p.loaded.candidate.name)
    (run.path / "run.json").write_text("{}")
    runner = Runner(p, run, Progress(quiet=True))
    t0 = time.perf_counter()
    try:
        result = await runner.run_stage("capacity")
    finally:
        await runner.lanes.stop()
    wall = time.perf_counter() - t0
    attempt = run.path / "capacity" / f"attempt-{result.attempt:03d}"
    return {
        "stage_wall_s": round(wall, 1),
        "data_wall_s": result.data.get("wall_s"),
        "parts_s": parts(attempt),
        "evidence": str(attempt),
        **summary(result.data, result.gates),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("candidate", type=Path)
    ap.add_argument("--out", type=Path, default=None, help="evidence directory (default: temp)")
    args = ap.parse_args()
    text = args.candidate.read_text()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "cand"
        work.mkdir()
        text = re.sub(r"(?m)^run = \[.*\]$", 'run = ["capacity"]', text)
        (work / "candidate.toml").write_text(text)
        for other in args.candidate.parent.glob("*.toml"):
            if other.name != "candidate.toml":
                (work / other.name).write_text(other.read_text())
        out = args.out or Path(tmp) / "evidence"
        try:
            print(json.dumps(asyncio.run(one(work / "candidate.toml", out)), indent=1))
        finally:
            stop_all()


if __name__ == "__main__":
    main()
