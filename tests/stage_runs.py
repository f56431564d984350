"""One stage of a plan run against real servers: a module of its own (not conftest) so that a
test collected beside the unit tests' conftests imports it by a name no other file has.

Every stage run here is also held to the one judging path: its sealed record and gates must be
exactly what the stage's `rebuild` derives again from the sealed attempt, as `verify` does."""

from __future__ import annotations

import asyncio
import json

from qualify.evidence.kept import AttemptView, as_table
from qualify.evidence.store import RunDir
from qualify.gates.files import default_gates_dir
from qualify.gates.runner import judge_stage
from qualify.pipeline import Plan, Runner
from qualify.progress import Progress
from qualify.records import StageResult
from qualify.registry import rebuild_of


class StageRunner:
    """Runs single stages of one plan against real servers, then stops them."""

    def __init__(self, p: Plan, run: RunDir) -> None:
        self.runner = Runner(p, run, Progress(quiet=True))
        self.run = run
        self.p = p

    def stage(self, name: str) -> StageResult:
        result = asyncio.run(self._one(name))
        self.rederived(result)
        return result

    async def _one(self, name: str) -> StageResult:
        try:
            return await self.runner.run_stage(name)
        finally:
            await self.runner.lanes.stop()

    def rederived(self, result: StageResult) -> None:
        """The sealed record and gates are the ones the stage's `rebuild` gives again from the
        sealed attempt: equal as JSON, field for field (no tolerance), and gate for gate."""
        fn = rebuild_of(result.stage)
        if fn is None or result.status != "finished" or not (result.data or result.gates):
            return
        rel = f"{result.stage}/attempt-{result.attempt:03d}"
        files = {p.relative_to(self.run.path).as_posix(): "" for p in self.run.all_files()}
        control = self.p.control.candidate if self.p.control else None
        view = AttemptView(self.run.path, rel, files, result, self.p.loaded.candidate, control)
        again = json.loads(json.dumps(as_table(fn(view))))
        assert again == result.data, f"{rel}: the sealed record is not the one rebuilt from it"
        if view.judged is None:
            gates, _ = judge_stage(result.stage, default_gates_dir(), again, self.runner.thresholds)
        else:
            gates = view.judged
        key = [(g.key, g.verdict, g.reasons) for g in result.gates if g.gate != "gate-files"]
        assert [(g.key, g.verdict, g.reasons) for g in gates] == key, f"{rel}: gates differ"
