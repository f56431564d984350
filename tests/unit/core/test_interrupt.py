"""Ctrl-C stops a run even when the code running at that moment swallows the cancellation.

The stages are stand-ins (no server). A real SIGINT is sent to this process while a stage runs:
the run's own handler must turn it into an aborted stage, no later stage, and `interrupted`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from pathlib import Path

import pytest

from qualify.candidate import load_candidate
from qualify.evidence.store import EvidenceStore
from qualify.pipeline import Plan, Runner
from qualify.progress import Progress
from qualify.records import StageResult
from qualify.stage import STAGES, StageContext, finish

ROOT = Path(__file__).resolve().parents[3]
ORDER = ["identity", "preflight", "context"]


def _runner(tmp_path: Path) -> Runner:
    loaded = load_candidate(ROOT / "examples" / "smollm2" / "candidate.toml")
    run = EvidenceStore(tmp_path / "ev").new_run("interrupt")
    return Runner(Plan(loaded, None, list(ORDER)), run, Progress(quiet=True))


@pytest.mark.parametrize("swallow", [0, 1, 3])
def test_sigint_aborts_a_stage_that_swallows_the_cancellation(
    swallow: int, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`swallow` cancellations are caught and ignored by the stage (as a library may do); the
    run still stops in that stage, records it `aborted`, and runs nothing after it."""
    ran: list[str] = []

    async def stage(ctx: StageContext) -> StageResult:
        ran.append(ctx.name)
        if ctx.name == "preflight":
            asyncio.get_running_loop().call_later(0.05, os.kill, os.getpid(), signal.SIGINT)
            for _ in range(swallow):
                with contextlib.suppress(asyncio.CancelledError):
                    await asyncio.sleep(3600)
            await asyncio.sleep(3600)
        return finish(ctx, [])

    for name in ORDER:
        monkeypatch.setitem(STAGES, name, stage)
    runner = _runner(tmp_path)
    # A bound, not a timing: without the repeated cancellation the stage sleeps an hour and
    # the bound ends it with TimeoutError instead of the run's own CancelledError.
    with pytest.raises(asyncio.CancelledError):
        asyncio.run(asyncio.wait_for(runner.execute(False), 60))
    assert runner.interrupted == "SIGINT"
    assert ran == ["identity", "preflight"]
    (last,) = runner.run.results("preflight")
    assert last.status == "aborted" and "interrupted (SIGINT)" in last.reasons[0]
    assert [r.status for r in runner.run.results("identity")] == ["finished"]


def test_sigint_after_a_stage_ends_starts_nothing_new(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A signal that lands between two stages: the next stage is not started."""
    ran: list[str] = []

    async def stage(ctx: StageContext) -> StageResult:
        ran.append(ctx.name)
        if ctx.name == "identity":
            os.kill(os.getpid(), signal.SIGINT)  # handled by the loop after this stage returns
        return finish(ctx, [])

    for name in ORDER:
        monkeypatch.setitem(STAGES, name, stage)
    runner = _runner(tmp_path)
    with pytest.raises(asyncio.CancelledError):
        asyncio.run(runner.execute(False))
    assert runner.interrupted == "SIGINT"
    assert "context" not in ran
