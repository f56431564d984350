"""One stage of a plan run against real servers: a module of its own (not conftest) so that a
test collected beside the unit tests' conftests imports it by a name no other file has."""

from __future__ import annotations

import asyncio

from qualify.evidence.store import RunDir
from qualify.pipeline import Plan, Runner
from qualify.progress import Progress
from qualify.records import StageResult


class StageRunner:
    """Runs single stages of one plan against real servers, then stops them."""

    def __init__(self, p: Plan, run: RunDir) -> None:
        self.runner = Runner(p, run, Progress(quiet=True))
        self.run = run

    def stage(self, name: str) -> StageResult:
        return asyncio.run(self._one(name))

    async def _one(self, name: str) -> StageResult:
        try:
            return await self.runner.run_stage(name)
        finally:
            await self.runner.lanes.stop()
