"""What every stage is handed (`StageContext`), how it registers its checks of the candidate file
(`@validator`), and `finish`.

Which stages exist, and in what order, is `qualify.registry`: each stage's spec holds its
function (`StageParts.run`), and every list of stages here reads the registry."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import structlog
from pydantic import BaseModel
from structlog.typing import FilteringBoundLogger

from qualify.candidate import Candidate, LoadedCandidate
from qualify.evidence.kept import AttemptView, NotKept, as_table
from qualify.evidence.store import Attempt, RunDir, utc_now
from qualify.gates.files import default_gates_dir, load_gates
from qualify.gates.runner import judge_stage
from qualify.gates.thresholds import Thresholds
from qualify.httpclient.client import Client, Exchange
from qualify.records import GateResult, StageResult, Verdict, worst
from qualify.registry import judged_stages, rebuild_of, specs, stage_names

if TYPE_CHECKING:
    from qualify.progress import Progress
    from qualify.serving.lanes import Lanes

StageFn = Callable[["StageContext"], Awaitable[StageResult]]
Validator = Callable[[LoadedCandidate], list[str]]
STAGES: dict[str, StageFn] = {}
VALIDATORS: list[Validator] = []


def load_all() -> None:
    """Every declared stage's function, from its spec, in the registry's order (importing its
    parts registers its validators)."""
    for spec in list(specs().values()):
        STAGES.setdefault(spec.name, spec.loaded.run)


def validator(fn: Validator) -> Validator:
    """Register a check that `qualify validate` runs: one line per problem, nothing sent."""
    VALIDATORS.append(fn)
    return fn


@validator
def _gate_files(loaded: LoadedCandidate) -> list[str]:
    """The project's gate files load, each problem once: every file belongs to one stage (the
    folder it sits in), and each stage's files are checked in one place: here, except a probe
    stage the candidate runs, which checks the gate files it selects in its own validator (the
    candidate may name a subset, or preflight its own folder)."""
    run, judged = set(loaded.candidate.stages.run), set(judged_stages())
    problems: list[str] = []
    for name in stage_names():
        if name in judged or name not in run:
            problems.extend(load_gates(default_gates_dir(), name)[1])
    return problems


def unknown_level(loaded: LoadedCandidate, stage_name: str, level: str | None) -> list[str]:
    """`stages.<stage>.level` must name one of the candidate's reasoning levels (when the stage
    runs and names one): one line if it does not."""
    cand = loaded.candidate
    if stage_name not in cand.stages.run or level is None or level in cand.reasoning:
        return []
    return [
        f"stages.{stage_name}.level: {level!r} is not a reasoning level (expected one of "
        f"{sorted(cand.reasoning)})"
    ]


def safe(label: str) -> str:
    """A label as `StageContext.keep` writes it into a file name."""
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in label)


@dataclass
class StageContext:
    """What a stage gets: the candidate, its attempt directory, and the server lanes."""

    name: str
    loaded: LoadedCandidate
    run: RunDir
    attempt: Attempt
    lanes: Lanes
    progress: Progress
    started_at: str = field(default_factory=utc_now)
    log: FilteringBoundLogger = field(default_factory=lambda: structlog.get_logger("qualify"))
    sampler: object = None  # the run's GPU sampler (`qualify.vram.sampler.Sampler`), if any
    thresholds: Thresholds = field(default_factory=Thresholds)
    gates_dir: Path = field(default_factory=default_gates_dir)
    # False only for `qualify run --plan`, whose stages keep the requests they would send
    from_kept: bool = True
    _seq: int = 0

    def judge(self, data: object) -> list[GateResult]:
        """Every gate `gates/<stage>/` declares, judged over what this stage measured.

        A gate file that does not load is an `error` gate naming the file: a stage never
        passes on fewer gates than were declared."""
        gates, problems = judge_stage(self.name, self.gates_dir, data, self.thresholds)
        if problems:
            gates.append(
                GateResult(
                    gate="gate-files",
                    stage=self.name,
                    verdict=Verdict.ERROR,
                    reasons=problems,
                )
            )
        return gates

    @property
    def candidate(self) -> Candidate:
        return self.loaded.candidate

    async def client(self, lane: str = "candidate") -> Client:
        """The client of a lane; switches servers when the lane is not the one running."""
        return await self.lanes.use(lane)

    def keep(self, label: str, ex: Exchange) -> list[str]:
        """Keep one exchange as evidence, numbered in the order it happened."""
        self._seq += 1
        name = f"{self._seq:04d}-{safe(label)}.json"
        redactor = self.attempt.redactor
        return self.attempt.write_json(name, ex.evidence(redactor))


def finish(
    ctx: StageContext,
    gates: list[GateResult],
    data: dict[str, object] | BaseModel | None = None,
    verdict: Verdict | None = None,
) -> StageResult:
    """A finished stage result, judged once from what its attempt kept: when the stage's spec
    names a `rebuild`, its record (and a probe stage's gates) are what that function derives
    from the attempt's files, the very function `verify` runs again, and its judges read that
    record. `data` is the stage's draft record (a typed record or a table): what its rebuild
    takes as recorded. The verdict is the worst of the gates unless one is given."""
    if isinstance(data, BaseModel):
        data = data.model_dump(mode="json")
    data = data or {}
    why: list[str] = []
    fn = rebuild_of(ctx.name)
    # a stage that measured and judged nothing claims nothing to derive
    if fn is not None and ctx.from_kept and (data or gates):
        # rebuilt over the attempt just written, the draft standing for what it takes as recorded,
        # with every file of the run so far, as `verify` has every signed one (vram: telemetry/)
        rel = ctx.attempt.path.relative_to(ctx.run.path).as_posix()
        files = {p.relative_to(ctx.run.path).as_posix(): "" for p in ctx.run.all_files()}
        draft = _result(ctx, worst([g.verdict for g in gates]), [], gates, data)
        control = ctx.lanes.loaded.get("control")
        ctl = control.candidate if control else None
        view = AttemptView(ctx.run.path, rel, files, draft, ctx.candidate, ctl)
        try:  # a probe stage's rebuild replays its gates in an event loop of its own: off this one
            with ThreadPoolExecutor(1) as pool:
                data = as_table(pool.submit(fn, view).result())
            files_gates = [g for g in gates if g.gate == "gate-files"]
            gates = ctx.judge(data) if view.judged is None else [*view.judged, *files_gates]
        except NotKept as exc:
            lost = [f"cannot be judged from what it kept: {exc}"]
            err = GateResult(
                gate="kept-evidence", stage=ctx.name, verdict=Verdict.ERROR, reasons=lost
            )
            gates = [*gates, err]
    v = verdict or worst([g.verdict for g in gates])
    for g in gates:
        if g.verdict is not Verdict.PASS:
            why.extend(f"{g.key}: {r}" for r in g.reasons)
    return _result(ctx, v, why, gates, data)


def _result(
    ctx: StageContext, v: Verdict, why: list[str], gates: list[GateResult], data: dict[str, object]
) -> StageResult:
    return StageResult(
        stage=ctx.name,
        attempt=ctx.attempt.number,
        status="finished",
        verdict=v,
        reasons=why,
        gates=gates,
        data=data,
        started_at=ctx.started_at,
        ended_at=utc_now(),
        lane=ctx.lanes.current or "candidate",
    )
