"""The whole preflight against the real local llama-server, at both reasoning levels."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from qualify.preflight.record import Record
from qualify.records import GateResult, StageResult, Verdict
from qualify.registry import parse_record

pytestmark = pytest.mark.integration

# Generous: the 2 cores are shared, and a timeout would be an `error`, not the model's fault.
SLOW = {"timeout_s = 60": "timeout_s = 240"}


def gates_of(result: StageResult) -> dict[str, GateResult]:
    return {g.key: g for g in result.gates}


def attempt_dir(runner: Any) -> Path:
    return Path(runner.run.path) / "preflight" / "attempt-001"


def test_preflight_both_levels(
    candidate_factory: Callable[..., Path], stage_runner: Callable[[Path], Any]
) -> None:
    """Every gate runs at `off` and `think`; passes and fails are told apart by the evidence."""
    runner = stage_runner(candidate_factory(18101, stages=["preflight"], replace=SLOW))
    result = runner.stage("preflight")
    g = gates_of(result)
    record = parse_record("preflight", result.data)
    assert isinstance(record, Record)
    assert record.model_dump(mode="json") == result.data
    assert record.levels == ["off", "think"]
    assert record.reasoning_allowance["off"].tokens == 0
    ids = set(record.gate_files)
    assert set(g) == {f"preflight/{i}@{lv}" for i in ids for lv in ("off", "think")}
    errors = {k: v.reasons for k, v in g.items() if v.verdict is Verdict.ERROR}
    assert not errors, errors
    # Real passes through the server's own parsers.
    for key in ("smoke@off", "json@off", "json@think", "over-length@off", "over-length@think"):
        assert g[f"preflight/{key}"].verdict is Verdict.PASS, g[f"preflight/{key}"].reasons
    for key in ("typed-tools@think", "streaming-tools@think"):
        assert g[f"preflight/{key}"].verdict is Verdict.PASS, g[f"preflight/{key}"].reasons
    # An honest fail: with the empty think block prefilled, SmolLM2 writes prose, not a call.
    off_tools = g["preflight/typed-tools@off"]
    assert off_tools.verdict is Verdict.FAIL
    assert off_tools.reasons[0].startswith("attempt 1/3: no tool call (finish_reason=")
    # The evidence behind every attempt exists, with reasoning and content kept apart.
    where = attempt_dir(runner)
    for gate in result.gates:
        assert gate.attempts, gate.key
        for a in gate.attempts:
            assert a.files and all((where / f).is_file() for f in a.files), (gate.key, a.files)
    summary = json.loads(next(where.glob("*-think-streaming-tools-*.outcome.json")).read_text())
    assert {"content", "reasoning", "tool_calls", "usage", "finish_reason"} <= set(summary)
    raw = json.loads(next(where.glob("*-think-streaming-tools-*[0-9a-z].json")).read_text())
    assert raw["response"]["sse"] and raw["request"]["body"]["stream"] is True


def test_soft_empty_fails_for_real_when_the_template_opens_think(
    candidate_factory: Callable[..., Path], stage_runner: Callable[[Path], Any]
) -> None:
    """With a template that opens <think>, SmolLM2 answers inside reasoning only: soft-empty
    fails at `think` and says so, and passes at `off`, where thinking is turned off."""
    replace = {
        **SLOW,
        "Qwen-Qwen3-0.6B.jinja": "Qwen3.5-4B.jinja",
        "[stages.preflight]\n": '[stages.preflight]\ngates = ["soft-empty"]\n',
    }
    result = stage_runner(candidate_factory(18102, stages=["preflight"], replace=replace)).stage(
        "preflight"
    )
    g = gates_of(result)
    assert g["preflight/soft-empty@off"].verdict is Verdict.PASS, g["preflight/soft-empty@off"]
    think = g["preflight/soft-empty@think"]
    assert think.verdict is Verdict.FAIL
    assert think.reasons[0].startswith("soft-empty:"), think.reasons
    assert think.metrics["reasoning_chars"] > 0 and think.metrics["visible_chars"] == 0
