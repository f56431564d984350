"""Attribution to the change exists only by comparison.

vLLM 0.26 as recorded on the H200 (tests/fixtures/engines/vllm/): at `enable_thinking` the
SmolLM2 answer is parsed as reasoning from its first token to its last, content null
(`chat_completion.json`); at `reasoning_effort = "none"` it is visible content
(`chat_completion_effort_none.json`). The published attach candidate and control
(docs/gpu/vllm/candidates/) run the preflight and quality stages over those answers. The control
runs the candidate's preflight at every level both declare, so a gate that fails at `think`
reads "same on the control" when the control fails it alike, "differs from the control" only
when the control ran it at `think` and passed, and "not compared with the control" where the
control never ran it at that level; the next step follows the attribution.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from quality_fakes import FakeLanes

from qualify.candidate import load_candidate
from qualify.decision import causes
from qualify.decision.policy import evaluate
from qualify.evidence.store import EvidenceStore
from qualify.preflight.stage import preflight
from qualify.present.reading import StageView
from qualify.present.record import DecisionRecord
from qualify.progress import Progress
from qualify.quality.stage import quality
from qualify.records import StageResult
from qualify.stage import StageContext
from qualify.trust.house import PolicyRules

ROOT = Path(__file__).resolve().parents[3]
VLLM = ROOT / "tests" / "fixtures" / "engines" / "vllm"
CANDIDATES = ROOT / "docs" / "gpu" / "vllm" / "candidates"
THINK = json.loads((VLLM / "chat_completion.json").read_text())
VISIBLE = json.loads((VLLM / "chat_completion_effort_none.json").read_text())
Handler = Callable[[httpx.Request], httpx.Response]
THINK_BLOCK = "[reasoning.think]\nchat_template_kwargs = { enable_thinking = true }\n"


def recorded_vllm(thinks: bool) -> Handler:
    """The recorded server: the reasoning-only answer to a request at `enable_thinking` when
    `thinks`, else the visible one."""

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        at_think = (body.get("chat_template_kwargs") or {}).get("enable_thinking") is True
        return httpx.Response(200, json=THINK if at_think and thinks else VISIBLE)

    return handler


def _candidates(tmp: Path, control_levels: str) -> tuple[Path, Path]:
    """The published attach candidate, narrowed to two preflight gates and one task, and its
    control; `control_levels` "both" keeps the control's `think`, "off" drops it."""
    text = (CANDIDATES / "candidate-attach.toml").read_text()
    assert THINK_BLOCK in text
    text = text.replace(
        "[stages.preflight]\n", '[stages.preflight]\ngates = ["smoke", "soft-empty"]\n'
    )
    text = text.replace("[stages.quality]\n", '[stages.quality]\ntasks = ["recall-build"]\n')
    (tmp / "candidate-attach.toml").write_text(text)
    control = (CANDIDATES / "control-attach.toml").read_text()
    if control_levels == "off":  # a control that declares no `think`: its own file, not extends
        control = text.replace(THINK_BLOCK, "").replace(
            'name = "smollm2-135m-vllm-h200-ngram-attach"',
            'name = "smollm2-135m-vllm-h200-nospec-attach"',
        )
        control = control.replace(
            'speculation = { method = "ngram", draft_tokens = 5 }',
            'speculation = { method = "none", draft_tokens = 0 }',
        )
    (tmp / "control-attach.toml").write_text(control)
    return tmp / "candidate-attach.toml", tmp / "control-attach.toml"


def _decide(tmp: Path, control_thinks: bool, control_levels: str = "both") -> list[causes.Cause]:
    """Preflight on the candidate, quality on both lanes, the default house's evaluation, and
    the blocking gates grouped by cause."""
    cand_path, ctrl_path = _candidates(tmp, control_levels)
    cand, ctrl = load_candidate(cand_path), load_candidate(ctrl_path)
    handlers = {"candidate": recorded_vllm(True), "control": recorded_vllm(control_thinks)}
    lanes = FakeLanes({"candidate": cand, "control": ctrl}, handlers)
    run = EvidenceStore(tmp / "evidence").new_run(cand.candidate.name)

    def stage(name: str, fn: Callable[[StageContext], object]) -> StageResult:
        ctx = StageContext(name, cand, run, run.new_attempt(name), lanes, Progress(quiet=True))  # type: ignore[arg-type]
        return asyncio.run(fn(ctx))  # type: ignore[arg-type]

    results = {"preflight": stage("preflight", preflight), "quality": stage("quality", quality)}
    asyncio.run(lanes.stop())
    at = {k: [StageView(k, 1, Path(k), r)] for k, r in results.items()}
    ev = evaluate(list(results), at, PolicyRules())
    record = DecisionRecord.model_construct().model_copy(update={"evaluation": ev, "integrity": []})
    return causes.group(record, causes.variable_of({}))


def _tag_of(groups: list[causes.Cause], key: str) -> causes.Cause:
    return next(c for c in groups if key in c.keys)


def test_the_control_fails_alike_at_think_so_the_change_is_not_blamed(tmp_path: Path) -> None:
    """The real case: both lanes' answers end inside reasoning at `think`."""
    groups = _decide(tmp_path, control_thinks=True)
    smoke = _tag_of(groups, "preflight/smoke@think")
    assert smoke.family == "reasoning-only"
    assert smoke.label == "same on the control"
    soft = _tag_of(groups, "preflight/soft-empty@think")
    assert soft.label == "same on the control"
    assert "the control passes them" not in soft.action
    assert not [c for c in groups if c.tag == "differs"]


def test_the_control_passes_at_think_so_the_change_differs(tmp_path: Path) -> None:
    """Planted: the control gives visible answers at `think` (its gates there pass), the
    candidate the recorded reasoning-only ones: this, and only this, is the change's doing."""
    groups = _decide(tmp_path, control_thinks=False)
    smoke = _tag_of(groups, "preflight/smoke@think")
    assert smoke.label == "differs from the control"
    soft = _tag_of(groups, "preflight/soft-empty@think")
    assert soft.label == "differs from the control"
    assert (
        soft.action
        == "fix what the change breaks in tool calls and formats (the control passes them)"
    )
    # the next step is the first cause's action: a cause the comparison showed
    assert groups[0].tag == "differs"


@pytest.mark.parametrize("control_thinks", [True, False])
def test_a_gate_the_control_never_ran_at_that_level_is_not_compared(
    tmp_path: Path, control_thinks: bool
) -> None:
    """A control that declares no `think` runs no preflight there: whatever it would have
    answered, the `think` gates read "not compared with the control"."""
    groups = _decide(tmp_path, control_thinks, control_levels="off")
    for key in ("preflight/smoke@think", "preflight/soft-empty@think"):
        cause = _tag_of(groups, key)
        assert cause.label == "not compared with the control", (key, cause.label)
        assert "the control" not in cause.action
    assert not [c for c in groups if c.tag == "differs"]
