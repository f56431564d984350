"""Quality: every task in `gates/quality/`, three attempts at every reasoning level, all of
which must pass; then, on the control lane, the candidate's preflight at every level both
declare and the suite at the control's lowest level.

The control is the same recipe without the variable (for the demo, without speculative
decoding): a fault that only the variable introduces shows as a difference between the lanes,
and only where the control ran the same gate at the same level (`qualify.decision.causes`).
Control gates are reported as `quality/control-<task>@<level>` and
`quality/control-preflight-<gate>@<level>`.
"""

from __future__ import annotations

from dataclasses import dataclass

from qualify.candidate import Candidate, LoadedCandidate
from qualify.gates.files import LoadedGate, declared, default_gates_dir, load_gates, pick
from qualify.gates.probe import Keep, Sender, Write
from qualify.gates.runner import run_gate
from qualify.httpclient.client import Client
from qualify.preflight import stage as preflight
from qualify.preflight.code import check_code
from qualify.progress import Task
from qualify.quality import report
from qualify.quality.record import Control, Record
from qualify.quality.tasks import QualityContext
from qualify.records import GateResult, StageResult, Verdict
from qualify.stage import StageContext, finish, validator

CONTROL = "control"


def select(loaded: LoadedCandidate) -> tuple[list[LoadedGate], list[str]]:
    """The tasks the candidate names (all when it names none), and every problem found."""
    where = default_gates_dir()
    gates, problems = load_gates(where, "quality")
    field = f"{loaded.path}: stages.quality.tasks"
    wanted = loaded.candidate.stages.quality.tasks
    chosen, unknown = pick(gates, wanted, field, where / "quality", "task")
    return chosen, problems + unknown


@validator
def _task_files(loaded: LoadedCandidate) -> list[str]:
    """`qualify validate`: the tasks the candidate names exist and load."""
    if "quality" not in loaded.candidate.stages.run:
        return []
    return select(loaded)[1]


def task_context(
    candidate: Candidate,
    lane_candidate: Candidate,
    lane: str,
    level: str,
    io: tuple[Sender, Keep, Write],
) -> QualityContext:
    """The context a task runs in on `lane` at `level`: the lane's model and level fields, the
    candidate's quality settings; `io` is the client, keep and write (`verify` builds it again
    from the signed copies, with a client over the kept exchanges)."""
    s = candidate.stages.quality
    client, keep, write = io
    return QualityContext(
        client=client,
        keep=keep,
        write=write,
        model=lane_candidate.identity.model,
        level=level,
        fields=lane_candidate.reasoning[level].request_fields(),
        gates_dir=default_gates_dir(),
        timeout_s=s.timeout_s,
        temperature=s.temperature,
        budget_scale=s.budget_scale,
        lane=lane,
    )


def _context(ctx: StageContext, client: Client, lane: str, level: str) -> QualityContext:
    io = (client, _keeper(ctx, lane), ctx.attempt.write_json)
    return task_context(ctx.candidate, ctx.lanes.loaded[lane].candidate, lane, level, io)


def _keeper(ctx: StageContext, lane: str) -> Keep:
    return ctx.keep if lane == "candidate" else lambda label, ex: ctx.keep(f"{lane}-{label}", ex)


def _as_control(r: GateResult, name: str) -> GateResult:
    return r.model_copy(update={"gate": name, "stage": "quality"})


@dataclass(frozen=True)
class ControlPlan:
    """Where the control lane runs: `level`, its lowest, for the tasks (None: not run, `why_not`
    says why), and `preflight_levels` for the candidate's preflight gates: every level the
    candidate declares that the control declares too. None in records made when the control's
    preflight ran at `level` alone, keyed by gate, with no reasoning allowance (records carry
    what they were made with)."""

    level: str | None
    why_not: str = ""
    preflight_levels: list[str] | None = None

    @property
    def preflight_at(self) -> list[str]:
        """The levels the control's preflight runs at."""
        if self.level is None:
            return []
        return [self.level] if self.preflight_levels is None else list(self.preflight_levels)


def shared_levels(candidate: Candidate, control: Candidate) -> list[str]:
    """The candidate's levels, in its order, that the control declares too: where the lanes
    can run the same preflight gate on the same request."""
    return [lv for lv in candidate.reasoning if lv in control.reasoning]


def control_plan(ctx: StageContext) -> ControlPlan:
    """Where the control runs, or None and why the control is not run."""
    if not ctx.candidate.stages.quality.control:
        return ControlPlan(None, "stages.quality.control is false", [])
    if not ctx.lanes.has(CONTROL):
        why = "this run has no control lane (stages.ab.control with ab in stages.run)"
        return ControlPlan(None, why, [])
    control = ctx.lanes.loaded[CONTROL].candidate
    levels = shared_levels(ctx.candidate, control)
    return ControlPlan(next(iter(control.reasoning)), "", levels)


async def _control_lane(
    ctx: StageContext,
    gates: list[LoadedGate],
    plan: ControlPlan,
    results: list[GateResult],
    bar: Task,
) -> None:
    """The control lane: the candidate's preflight gates at every level of `plan`, named
    `control-preflight-<gate>`, then every task at its lowest level, named `control-<gate>`."""
    assert plan.level is not None
    client = await ctx.client(CONTROL)
    control = ctx.lanes.loaded[CONTROL].candidate
    io = (client, _keeper(ctx, CONTROL), ctx.attempt.write_json)
    where = preflight.gates_dir(ctx.loaded)
    pf, _ = preflight.select(ctx.loaded)
    for level in plan.preflight_at:
        for gate in pf:
            gctx = preflight.gate_context(control, level, *io, where)
            r = await run_gate(gate, gctx)
            results.append(_as_control(r, f"control-preflight-{r.gate}"))
    bar.advance(len(pf) * len(plan.preflight_at), note="quality control preflight")
    for gate in gates:
        r = await run_gate(gate, _context(ctx, client, CONTROL, plan.level))
        results.append(_as_control(r, f"control-{r.gate}"))
        bar.advance(note=f"quality control {r.gate}")


def summarised(
    ran: Record, gates: list[LoadedGate], results: list[GateResult], where: str, plan: ControlPlan
) -> Record:
    """The record with its totals, table, failures and control, from every gate result (a
    task's on the control named `control-<task>`); `plan` is `control_plan`'s answer."""
    tasks = [
        (CONTROL if task != r.gate else "candidate", task, r)
        for r in results
        if not r.gate.startswith("control-preflight-")
        for task in [r.gate.removeprefix(f"{CONTROL}-")]
    ]
    summary = report.summarise(ran, tasks, {g.gate.id: g.gate.attempts for g in gates}, where)
    control = Control(
        ran=plan.level is not None,
        level=plan.level,
        why_not=plan.why_not or None,
        # by `<gate>@<level>`, or by gate alone in the form of records made when it ran at one
        # level (`ControlPlan.preflight_levels` None)
        preflight={
            r.gate.removeprefix("control-preflight-") + at: r.verdict
            for r in results
            if r.gate.startswith("control-preflight-")
            for at in ["" if plan.preflight_levels is None else f"@{r.level}"]
        },
        # written only where the control's preflight ran by level (the form records keep)
        **({} if plan.preflight_levels is None else {"preflight_levels": plan.preflight_levels}),
    )
    return summary.model_copy(update={"control": control})


def ran_record(candidate: Candidate, gates: list[LoadedGate]) -> Record:
    """The part of the record written before any task runs: levels, scope, budgets, gate files."""
    s = candidate.stages.quality
    levels = list(candidate.reasoning)
    return Record(
        levels=levels,
        scope=report.scope(gates, levels),
        budget_scale=s.budget_scale,
        budgets=report.task_budgets(gates, s.budget_scale),
        gate_files={g.gate.id: g.sha256 for g in gates},
        declared_gate_files=declared("quality"),
    )


async def quality(ctx: StageContext) -> StageResult:
    """Pass when every attempt of every task passes on every lane and level it runs at."""
    s = ctx.candidate.stages.quality
    gates, problems = select(ctx.loaded)
    levels = list(ctx.candidate.reasoning)
    ran = ran_record(ctx.candidate, gates)
    if problems or not gates:
        why = problems or ["no task files in gates/quality/"]
        bad = GateResult(gate="gate-files", stage="quality", verdict=Verdict.ERROR, reasons=why)
        return finish(ctx, [bad], ran)
    ran = ran.model_copy(update={"check_code": check_code("quality")})
    for line in report.budget_lines(ran.budgets, s.budget_scale):
        ctx.progress.say(line)
    plan = control_plan(ctx)
    pf_count = len(preflight.select(ctx.loaded)[0]) * len(plan.preflight_at)
    total = len(levels) * len(gates) + pf_count + (len(gates) if plan.level else 0)
    results: list[GateResult] = []
    with ctx.progress.task("quality", total) as bar:
        client = await ctx.client("candidate")
        for level in ctx.candidate.reasoning:
            for gate in gates:
                r = await run_gate(gate, _context(ctx, client, "candidate", level))
                results.append(r)
                bar.advance(note=f"quality {r.key}")
        if plan.level is not None:
            await _control_lane(ctx, gates, plan, results, bar)
    where = ctx.attempt.path.relative_to(ctx.run.path).as_posix()
    record = summarised(ran, gates, results, where, plan)
    for line in record.lines:
        ctx.progress.say(line)
    return finish(ctx, results, record)
