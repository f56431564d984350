"""The acceptance line's engine-step figures, read back from the published vLLM run's evidence
(docs/gpu/vllm/judged-once): tokens per step from the A/B's counted output and accepted
tokens, and a candidate step's cost in control steps from its decode row."""

from __future__ import annotations

import json
import re
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
RUN = "smollm2-135m-vllm-h200-ngram-attach/20261204T190027Z-8440c7"


def test_the_step_figures_are_the_evidence_s(tmp_path: Path) -> None:
    from qualify.decision import document
    from qualify.decision.conclude import latest
    from qualify.evidence.store import RunDir
    from qualify.present.reading import run_view

    with tarfile.open(ROOT / "docs/gpu/vllm/judged-once/evidence.tgz") as tgz:
        tgz.extractall(tmp_path, filter="data")
    run = RunDir(tmp_path / RUN)
    record = latest(run, None)
    assert record is not None
    text = document.render(run_view(run, record), record)
    got = re.search(
        r"that is ([\d.]+) tokens per engine step, and at ([\d.]+)x the control's "
        r"decode each step took ([\d.]+)x a control step's time",
        text,
    )
    assert got is not None, "the acceptance line reconciles acceptance and speed"
    data = json.loads((tmp_path / RUN / "ab/attempt-001/result.json").read_text())["data"]
    accepted = data["acceptance"]["accepted"]
    counted = [
        q for r in data["lanes"]["candidate"]["runs"] for q in r["requests"] if not q.get("failed")
    ]
    tokens = sum(q.get("completion_tokens") or 0 for q in counted)
    decode = next(m for m in data["metrics"] if m["metric"] == "decode_tok_s")
    per_step, speed = tokens / (tokens - accepted), decode["candidate"] / decode["control"]
    assert got.groups() == (f"{per_step:.2f}", f"{speed:.2f}", f"{per_step / speed:.2f}")
    assert (accepted, tokens) == (1119, 2693)
