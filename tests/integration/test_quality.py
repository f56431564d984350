"""The demo's quality stage against the real local llama-server: 12 tasks x 3 attempts at the
`off` level, then preflight and the suite at that level on the no-spec control. (The demo runs
both levels; here one keeps the suite within its time: the real server's `think` level is
run by tests/integration/test_preflight.py, the level loop by tests/unit/quality.)"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from qualify.quality.record import Record
from qualify.records import Verdict
from qualify.registry import parse_record

pytestmark = pytest.mark.integration


def test_quality_every_task_and_the_control(
    candidate_factory: Callable[..., Path], stage_runner: Callable[[Path], Any]
) -> None:
    """Every attempt is judged (no harness errors); a 135M model fails most tasks, honestly,
    and each failure is a wrong answer or one cut by the budget, with its evidence kept."""
    # Half the demo's budgets: a 135M model fails these tasks at either size, and every
    # attempt is still judged (the budget is recorded and checked below).
    lean = {
        "budget_scale = 0.0625": "budget_scale = 0.03125",
        "[reasoning.think]\nchat_template_kwargs = { enable_thinking = true }\n"
        "thinking_budget_tokens = 96\n": "",
    }
    runner = stage_runner(candidate_factory("quality", stages=["quality", "ab"], replace=lean))
    result = runner.stage("quality")
    data = result.data
    record = parse_record("quality", data)
    assert isinstance(record, Record)
    assert record.model_dump(mode="json") == data
    tasks = {b.task for b in record.budgets}
    assert len(tasks) == 12
    assert record.levels == ["off"]
    assert record.control is not None
    assert record.control.ran is True and record.control.level == "off"
    assert {f"quality/{t}@off" for t in tasks} <= {g.key for g in result.gates}
    errors = {g.key: g.reasons for g in result.gates if g.verdict is Verdict.ERROR}
    assert not errors, errors
    counts = data["totals"]["candidate"]
    assert set(counts) == {"off"}
    for c in counts.values():
        assert sum(c.values()) == 36 and c["error"] == 0 and c["not run"] == 0
    assert sum(data["totals"]["control"]["off"].values()) == 36
    assert data["lines"][0].startswith("quality: ") and data["lines"][0].count(" at off") == 1
    # The evidence of a failing attempt holds the request with its budget and the answer.
    failure = data["failures"][0]
    assert failure["outcome"] in ("wrong", "cut")
    where = Path(runner.run.path)
    raw = json.loads((where / failure["evidence"][0]).read_text())
    budget = next(b for b in data["budgets"] if b["task"] == failure["task"])
    assert raw["request"]["body"]["max_tokens"] == budget["max_tokens"]
    summary = json.loads((where / failure["evidence"][1]).read_text())
    assert {"content", "reasoning", "finish_reason", "usage"} <= set(summary)
