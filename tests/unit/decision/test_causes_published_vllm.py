"""The published vLLM run judged once (docs/gpu/vllm/judged-once/), rendered again: the real
`think`-level answers of vLLM 0.26 end inside reasoning, and that run's control ran its
preflight at `off` only, so nothing compared the lanes at `think`. Its signed document blamed
the change ("differs from the control" for `preflight/*@think`); rendered now, no cause says
"differs from the control" for a gate the control did not run at that level, and the next step
does not send a reviewer to undo the change for it."""

from __future__ import annotations

import re
import tarfile
from pathlib import Path

import pytest

from qualify.decision import causes, document
from qualify.decision.conclude import latest
from qualify.evidence.store import RunDir
from qualify.present.reading import run_view
from qualify.present.record import DecisionRecord

ROOT = Path(__file__).resolve().parents[3]
ARCHIVE = ROOT / "docs" / "gpu" / "vllm" / "judged-once" / "evidence.tgz"
RUN = "smollm2-135m-vllm-h200-ngram-attach/20261204T190027Z-8440c7"


@pytest.fixture(scope="module")
def judged_once(tmp_path_factory: pytest.TempPathFactory) -> tuple[RunDir, DecisionRecord]:
    dest = tmp_path_factory.mktemp("judged-once")
    with tarfile.open(ARCHIVE) as tf:
        tf.extractall(dest, members=[m for m in tf if m.name.startswith(RUN)], filter="data")
    run = RunDir(dest / RUN)
    record = latest(run)
    assert record is not None
    return run, record


def _compared(key: str, by_key: set[str]) -> bool:
    """Whether the control ran the gate of `key` at its level (its `quality/control-*` key)."""
    stage, gate = key.split("/", 1)
    prefix = {"preflight": "control-preflight-", "quality": "control-"}.get(stage)
    return prefix is not None and f"quality/{prefix}{gate}" in by_key


def test_no_cause_blames_the_change_where_the_control_did_not_run(
    judged_once: tuple[RunDir, DecisionRecord],
) -> None:
    run, record = judged_once
    keys = {g.key for g in record.evaluation.gates}
    assert "preflight/smoke@think" in keys and "quality/control-preflight-smoke@off" in keys
    assert not [k for k in keys if k.startswith("quality/control-") and k.endswith("@think")]
    signed = (run.path / "decision" / "attempt-001" / "decision.md").read_text()
    assert re.search(r"\*\*differs from the control\*\*: the answer ends inside reasoning", signed)

    groups = causes.group(record, causes.variable_of({}))
    for c in groups:
        if c.tag != "differs":
            continue
        for key in c.keys:
            if key.split("/", 1)[0] in ("preflight", "quality"):
                assert _compared(key, keys), f"{key} blamed on the change, never compared"
    think = [c for c in groups if any(k.endswith("@think") for k in c.keys)]
    assert {c.label for c in think} == {"not compared with the control"}
    assert {k for c in think for k in c.keys} >= {
        "preflight/garble@think",
        "preflight/smoke@think",
        "preflight/soft-empty@think",
    }

    text = document.render(run_view(run, record), record)
    first = text.split("\n## ", 1)[0]
    assert "the control passes them" not in text
    for line in first.splitlines():
        if "**differs from the control**" in line:
            assert "@think" not in line, line
