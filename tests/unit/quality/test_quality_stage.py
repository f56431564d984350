"""The quality stage over fake lanes: every task at every level, the control's preflight at
every level both lanes declare and its tasks at its lowest level, and the data the decision
shows (totals, table, budgets, scope, failing evidence)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from quality_fakes import FakeLanes, chat

from qualify.candidate import load_candidate
from qualify.evidence.store import EvidenceStore
from qualify.gates.files import default_gates_dir, load_gates
from qualify.progress import Progress
from qualify.quality.record import Record
from qualify.quality.stage import quality, select
from qualify.records import StageResult, Verdict
from qualify.registry import parse_record
from qualify.stage import StageContext

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "smollm2"
Handler = Callable[[httpx.Request], httpx.Response]


def recall_only(request: httpx.Request) -> httpx.Response:
    """A model that answers every question with the candidate's build id."""
    return httpx.Response(200, json=chat("b7421-spec"))


def stage_context(tmp: Path, extra: str = "", control: bool = True) -> tuple[StageContext, Any]:
    text = (EXAMPLE / "candidate.toml").read_text()
    text = text.replace("budget_scale = 0.0625\n", f"budget_scale = 0.0625\n{extra}")
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "candidate.toml").write_text(text)
    (tmp / "control.toml").write_text((EXAMPLE / "control.toml").read_text())
    cand = load_candidate(tmp / "candidate.toml")
    loaded = {"candidate": cand}
    if control:
        loaded["control"] = load_candidate(tmp / "control.toml")
    lanes = FakeLanes(loaded, {"candidate": recall_only, "control": recall_only})
    run = EvidenceStore(tmp / "evidence").new_run(cand.candidate.name)
    ctx = StageContext(
        "quality", cand, run, run.new_attempt("quality"), lanes, Progress(quiet=True)
    )  # type: ignore[arg-type]
    return ctx, lanes


def run_stage(ctx: StageContext) -> StageResult:
    return asyncio.run(quality(ctx))


def test_suite_has_twelve_tasks_of_every_kind_with_three_attempts() -> None:
    gates, problems = load_gates(default_gates_dir(), "quality")
    assert not problems, problems
    assert len(gates) >= 12
    assert {g.gate.attempts for g in gates} == {3}
    kinds = {g.gate.check for g in gates}
    assert kinds == {
        "diff_edit", "python_code", "recall", "tool_choice", "json_answer", "bullets",
        "ordered_steps",
    }  # fmt: skip


def test_stage_runs_every_task_at_every_level_then_the_control(tmp_path: Path) -> None:
    ctx, lanes = stage_context(tmp_path)
    result = run_stage(ctx)
    ids = {g.gate.id for g in select(ctx.loaded)[0]}
    keys = {g.key for g in result.gates}
    for level in ("off", "think"):
        assert {f"quality/{i}@{level}" for i in ids} <= keys
    assert {f"quality/control-{i}@off" for i in ids} <= keys
    # The control's preflight runs at every level both lanes declare, its tasks at the lowest.
    assert {"quality/control-preflight-smoke@off", "quality/control-preflight-smoke@think"} <= keys
    assert not {f"quality/control-{i}@think" for i in ids} & keys
    assert lanes.switches == ["candidate", "control"]
    assert result.verdict is not Verdict.PASS

    record = parse_record("quality", result.data)
    assert isinstance(record, Record)
    assert record.model_dump(mode="json") == {**result.data, "record_version": 1}
    assert record.lines[:2] == [
        "quality: 3/36 at off (33 wrong)",
        "quality: 3/36 at think (33 wrong)",
    ]
    assert record.lines[2] == "quality (control): 3/36 at off (33 wrong)"
    assert record.control is not None
    assert record.control.ran is True and record.control.level == "off"
    assert record.control.preflight_levels == ["off", "think"]
    assert set(record.control.preflight) >= {"smoke@off", "smoke@think"}
    row = next(r for r in record.table if r.task == "recall-build" and r.level == "think")
    assert row.attempts == ["pass", "pass", "pass"]
    budgets = {b.task: b for b in record.budgets}
    assert budgets["diff-pager"].visible_tokens == 512
    assert budgets["diff-pager"].max_tokens == 32 + 128
    assert record.scope.startswith("12 agent-shaped tasks written for this project (")
    assert record.totals["candidate"]["off"] == {
        "pass": 3,
        "wrong": 33,
        "cut": 0,
        "error": 0,
        "not run": 0,
    }
    # Every failing attempt names its evidence, and the evidence is there.
    assert len(record.failures) == 33 * 3
    for failure in record.failures:
        assert failure.evidence, failure
        for rel in failure.evidence:
            assert (ctx.run.path / rel).is_file(), rel
    kept = json.loads((ctx.run.path / record.failures[0].evidence[0]).read_text())
    assert kept["request"]["body"]["max_tokens"] > 0


def test_control_off_by_setting(tmp_path: Path) -> None:
    ctx, lanes = stage_context(tmp_path, extra="control = false\n")
    result = run_stage(ctx)
    assert lanes.switches == ["candidate"]
    assert not [g for g in result.gates if g.gate.startswith("control-")]
    assert result.data["control"] == {
        "ran": False,
        "level": None,
        "why_not": "stages.quality.control is false",
        "preflight": {},
        "preflight_levels": [],
    }


def test_no_control_lane_says_why(tmp_path: Path) -> None:
    ctx, _ = stage_context(tmp_path, extra='tasks = ["recall-build"]\n', control=False)
    result = run_stage(ctx)
    assert [g.key for g in result.gates] == [
        "quality/recall-build@off",
        "quality/recall-build@think",
    ]
    assert result.verdict is Verdict.PASS
    assert "no control lane" in result.data["control"]["why_not"]
    assert result.data["lines"] == ["quality: 3/3 at off", "quality: 3/3 at think"]


def test_unknown_task_id_is_named(tmp_path: Path) -> None:
    ctx, _ = stage_context(tmp_path, extra='tasks = ["recall-build", "nope"]\n')
    _, problems = select(ctx.loaded)
    assert len(problems) == 1
    assert "stages.quality.tasks[1]: expected a task id from" in problems[0]
    assert problems[0].endswith("(got 'nope')")
    result = run_stage(ctx)
    assert result.verdict is Verdict.ERROR and result.gates[0].gate == "gate-files"
    # a stage stopped at its gate files writes what it knew, nothing it did not measure
    assert list(result.data) == [
        "record_version",
        "levels",
        "scope",
        "budget_scale",
        "budgets",
        "gate_files",
        "declared_gate_files",
    ]


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        ("budget_scale = 0\n", "stages.quality.budget_scale: Input should be greater than 0"),
        ("controll = true\n", "stages.quality.controll: Extra inputs are not permitted"),
    ],
)
def test_bad_settings_are_named(tmp_path: Path, extra: str, said: str) -> None:
    from qualify.errors import BadInput

    text = (EXAMPLE / "candidate.toml").read_text()
    text = text.replace("budget_scale = 0.0625\n", extra)
    (tmp_path / "candidate.toml").write_text(text)
    with pytest.raises(BadInput) as err:
        load_candidate(tmp_path / "candidate.toml")
    assert any(line.startswith(said) for line in err.value.problems), err.value.problems
