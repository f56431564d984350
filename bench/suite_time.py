"""Wall time of `make demo` and `make test` on this machine, with the stage times of each demo.

    python bench/suite_time.py demo|test [--repeat N] [--out FILE]

Each repetition runs the make target from the repository root and times it; for the demo, the
stage times are read back from the run's own evidence (each stage attempt's `started_at` and
`ended_at`), so what is published is what the run recorded. Prints a Markdown table with the
median and the range over the repetitions and writes the raw figures as JSON. Results:
docs/performance.md ("Demo and test suite time").
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from qualify.serving.local import cpu_model  # noqa: E402

STAGES = ["identity", "preflight", "quality", "context", "ab", "capacity", "vram"]


def _stamp(s: str) -> float:
    return datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()


def _newest_run(evidence: Path, since: float) -> Path | None:
    runs = [p for p in evidence.glob("*/*") if (p / "run.json").is_file()]
    runs = [p for p in runs if p.stat().st_mtime >= since]
    return max(runs, key=lambda p: p.stat().st_mtime) if runs else None


def stage_times(run: Path) -> dict[str, float]:
    out: dict[str, float] = {}
    for name in STAGES:
        for res in sorted(run.glob(f"{name}/attempt-*/result.json")):
            r = json.loads(res.read_text())
            out[name] = out.get(name, 0.0) + _stamp(r["ended_at"]) - _stamp(r["started_at"])
    return out


def once(target: str) -> dict[str, Any]:
    t0 = time.time()
    proc = subprocess.run(["make", target], cwd=ROOT, capture_output=True, text=True)
    wall = time.time() - t0
    row: dict[str, Any] = {"target": target, "wall_s": round(wall, 1), "rc": proc.returncode}
    if target == "demo":
        run = _newest_run(ROOT / "evidence", t0)
        if run is not None:
            row["run"] = run.name
            row["stages_s"] = {k: round(v, 1) for k, v in stage_times(run).items()}
    else:
        tail = [ln for ln in proc.stdout.splitlines() if " passed" in ln or " failed" in ln]
        row["summary"] = tail[-2:]
    return row


def table(rows: list[dict[str, Any]]) -> str:
    def spread(xs: list[float]) -> str:
        if not xs:
            return "no data"
        if len(xs) == 1:
            return f"{xs[0]:.0f} s (1 run)"
        return f"{statistics.median(xs):.0f} s (range {min(xs):.0f}-{max(xs):.0f}, {len(xs)} runs)"

    lines = ["| part | time |", "| --- | --- |"]
    lines.append(f"| `make {rows[0]['target']}` wall | {spread([r['wall_s'] for r in rows])} |")
    for name in STAGES:
        xs = [r["stages_s"][name] for r in rows if name in r.get("stages_s", {})]
        if xs:
            lines.append(f"| {name} | {spread(xs)} |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("target", choices=["demo", "test"])
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    rows = []
    for _ in range(a.repeat):
        row = once(a.target)
        print(json.dumps(row), flush=True)
        rows.append(row)
    machine = f"{cpu_model()}, {os.cpu_count()} cores, {platform.platform()}"
    result = {"machine": machine, "command": " ".join(sys.argv), "rows": rows}
    print(f"\n{machine}\n\n{table(rows)}")
    if a.out:
        a.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0 if all(r["rc"] in (0,) for r in rows) or a.target == "demo" else 1


if __name__ == "__main__":
    sys.exit(main())
