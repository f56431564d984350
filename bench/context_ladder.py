"""How long the demo candidate's context ladder takes, and how many tokenizer calls each rung.

Copies `examples/smollm2/candidate.toml` to a temporary directory with `run = ["context"]` on
a port the OS picks, launches its llama-server through qualify's own lanes, and times the
context stage alone (server start excluded). Prints one line per row, the tokenizer calls
per rung, the stage's wall time and the load average, since the 2 cores may be shared.

    .venv/bin/python bench/context_ladder.py
"""

from __future__ import annotations

import asyncio
import os
import re
import tempfile
import time
from pathlib import Path
from typing import Any

from qualify.evidence.store import EvidenceStore
from qualify.pipeline import Runner, plan
from qualify.progress import Progress
from qualify.records import StageResult
from qualify.serving.process import stop_all

ROOT = Path(__file__).resolve().parent.parent
PORT = "{port}"  # picked free by the OS at launch


def candidate(tmp: Path) -> Path:
    text = (ROOT / "examples" / "smollm2" / "candidate.toml").read_text().replace("8091", PORT)
    text = re.sub(r"(?m)^run = \[.*\]$", 'run = ["context"]', text)
    (tmp / "candidate.toml").write_text(text)
    (tmp / "control.toml").write_text((ROOT / "examples" / "smollm2" / "control.toml").read_text())
    return tmp / "candidate.toml"


async def ladder(tmp: Path) -> tuple[StageResult, float]:
    p = plan(candidate(tmp))
    run = EvidenceStore(tmp / "evidence").new_run(p.loaded.candidate.name)
    (run.path / "run.json").write_text("{}")
    runner = Runner(p, run, Progress(quiet=True))
    try:
        await runner.lanes.use("candidate")  # start the server outside the timed part
        t0 = time.perf_counter()
        result = await runner.run_stage("context")
        return result, time.perf_counter() - t0
    finally:
        await runner.lanes.stop()


def _fmt(v: Any) -> str:
    return f"{v:.3g}" if isinstance(v, float) else str(v)


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="qualify-ctx-bench-") as d:
        try:
            result, wall = asyncio.run(ladder(Path(d)))
        finally:
            stop_all()
    keys = ("target", "pass", "planned_tokens", "actual_prompt_tokens", "cached_tokens")
    keys += ("ttfo_s", "ttft_s", "effective_prefill_tok_s", "decode_tok_s", "e2e_s", "needles")
    print(" | ".join(keys))
    for row in result.data["rows"]:
        print(" | ".join(_fmt(row.get(k)) for k in keys))
    for t in result.data["targets"]:
        counts = {k: v["sizing"]["calls"] for k, v in t["contents"].items()}
        print(
            f"rung {t['target']}: planned {t['planned_tokens']} (clamped {t['clamped']}), "
            f"tokenizer HTTP calls {result.data['tokenizer_calls'][str(t['target'])]}, "
            f"counts {counts}, wall {t['wall_s']:.1f} s"
        )
    for g in result.gates:
        print(f"{g.key}: {g.verdict.value}")
    print(f"context stage wall time {wall:.1f} s; load average {os.getloadavg()}")


if __name__ == "__main__":
    main()
