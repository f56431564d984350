"""Resume: an aborted run starts again at its first unfinished stage and runs every later one.

The stages here are stand-ins (no server): each records that it ran, and one raises
`RunAborted` as a dead server would make a real stage do.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from qualify.candidate import load_candidate
from qualify.errors import RunAborted
from qualify.evidence.store import EvidenceStore, RunDir
from qualify.pipeline import Plan, Runner
from qualify.progress import Progress
from qualify.records import StageResult
from qualify.registry import run_order
from qualify.stage import STAGES, StageContext, finish

ROOT = Path(__file__).resolve().parents[3]
ORDER = ["identity", "preflight", "context", "ab"]


class StandIns:
    """Stand-in stage functions: `ran` lists the stages run; `abort_in` names one that aborts."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.ran: list[str] = []
        self.abort_in: str | None = None
        for name in ORDER:
            monkeypatch.setitem(STAGES, name, self.stage)

    async def stage(self, ctx: StageContext) -> StageResult:
        self.ran.append(ctx.name)
        if ctx.name == self.abort_in:
            raise RunAborted(f"the candidate server died in {ctx.name}")
        return finish(ctx, [])


def _execute(run: RunDir, resume: bool) -> Runner:
    loaded = load_candidate(ROOT / "examples" / "smollm2" / "candidate.toml")
    runner = Runner(Plan(loaded, None, list(ORDER)), run, Progress(quiet=True))
    asyncio.run(runner.execute(resume))
    return runner


def _statuses(run: RunDir) -> dict[str, list[str]]:
    return {name: [r.status for r in run.results(name)] for name in ORDER}


@pytest.mark.parametrize("aborted", ORDER)
def test_abort_then_resume_runs_from_the_aborted_stage(
    aborted: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Stages after an abort are recorded `aborted` (not run), never `finished`; the resume keeps
    the stages before it, runs it and every later one, and keeps the aborted attempts."""
    stages = StandIns(monkeypatch)
    stages.abort_in = aborted
    run = EvidenceStore(tmp_path).new_run("c")
    first = _execute(run, resume=False)
    at = ORDER.index(aborted)
    assert first.aborted and stages.ran == ORDER[: at + 1]
    after = _statuses(run)
    assert all(after[s] == ["finished"] for s in ORDER[:at])
    assert all(after[s] == ["aborted"] for s in ORDER[at:])

    stages.ran, stages.abort_in = [], None
    second = _execute(run, resume=True)
    assert second.aborted is None and stages.ran == ORDER[at:]
    resumed = _statuses(run)
    assert all(resumed[s] == ["finished"] for s in ORDER[:at])
    assert all(resumed[s] == ["aborted", "finished"] for s in ORDER[at:])


def test_a_finished_stage_after_an_unfinished_one_runs_again(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A stage that errored while the run went on (a harness fault): the resume runs it and every
    stage after it, finished or not, since they were measured after it."""
    stages = StandIns(monkeypatch)
    run = EvidenceStore(tmp_path).new_run("c")
    _execute(run, resume=False)
    attempt = run.new_attempt("preflight")
    failed = StageResult(
        stage="preflight",
        attempt=attempt.number,
        status="aborted",
        verdict="error",
        reasons=["internal error"],
        started_at="t",
        ended_at="t",
    )
    attempt.write_result(failed)
    attempt.seal()
    stages.ran = []
    _execute(run, resume=True)
    assert stages.ran == ["preflight", "context", "ab"]


def test_a_finished_run_resumed_runs_nothing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Every stage finished: a resume keeps them all."""
    stages = StandIns(monkeypatch)
    run = EvidenceStore(tmp_path).new_run("c")
    _execute(run, resume=False)
    stages.ran = []
    _execute(run, resume=True)
    assert stages.ran == []


def test_vram_runs_last_whatever_its_place() -> None:
    """VRAM judges the stages sampled before it, so it runs after them wherever it is listed."""
    assert run_order(["vram", "identity", "ab"]) == ["identity", "ab", "vram"]
    assert run_order(["identity"]) == ["identity"]
