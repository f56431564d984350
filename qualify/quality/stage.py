"""Quality: every task in `gates/quality/`, three attempts at every reasoning level, all of
which must pass; then the lowest level of preflight and the suite again on the control lane.

The control is the same recipe without the variable (for the demo, without speculative
decoding): a fault that only the variable introduces shows as a difference between the lanes.
Control gates are reported as `quality/control-<task>@<level>` and
`quality/control-preflight-<gate>@<level>`.
"""

from __future__ import annotations

from typing import Any

from qualify.candidate import LoadedCandidate
from qualify.gates import GateContext, LoadedGate, load_gates, run_gate
from qualify.gates.files import declared, default_gates_dir, pick
from qualify.httpclient.client import Client, Exchange
from qualify.preflight import stage as preflight
from qualify.quality import report
from qualify.quality.record import Control, Record
from qualify.quality.tasks import QualityContext
from qualify.records import GateResult, StageResult, Verdict
from qualify.stage import StageContext, finish, stage, validator

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


def _context(
    ctx: StageContext, client: Client, lane: str, level: str, fields: dict[str, Any]
) -> QualityContext:
    s = ctx.candidate.stages.quality
    return QualityContext(
        client=client,
        keep=_keeper(ctx, lane),
        write=ctx.attempt.write_json,
        model=ctx.lanes.loaded[lane].candidate.identity.model,
        level=level,
        fields=fields,
        gates_dir=default_gates_dir(),
        timeout_s=s.timeout_s,
        temperature=s.temperature,
        budget_scale=s.budget_scale,
        lane=lane,
    )


def _keeper(ctx: StageContext, lane: str) -> Any:
    if lane == "candidate":
        return ctx.keep

    def keep(label: str, ex: Exchange) -> list[str]:
        return ctx.keep(f"{lane}-{label}", ex)

    return keep


def _as_control(r: GateResult, name: str) -> GateResult:
    return r.model_copy(update={"gate": name, "stage": "quality"})


def control_plan(ctx: StageContext) -> tuple[str | None, str]:
    """The level the control runs at, or None and why the control is not run."""
    if not ctx.candidate.stages.quality.control:
        return None, "stages.quality.control is false"
    if not ctx.lanes.has(CONTROL):
        return None, "this run has no control lane (stages.ab.control with ab in stages.run)"
    return next(iter(ctx.lanes.loaded[CONTROL].candidate.reasoning)), ""


async def _control_preflight(ctx: StageContext, client: Client, level: str) -> list[GateResult]:
    """The candidate's preflight gates at the control's lowest level, on the control."""
    lc = ctx.lanes.loaded[CONTROL]
    gates, _ = preflight.select(ctx.loaded)
    ps = lc.candidate.stages.preflight
    out = []
    for gate in gates:
        gctx = GateContext(
            client=client,
            keep=_keeper(ctx, CONTROL),
            write=ctx.attempt.write_json,
            model=lc.candidate.identity.model,
            level=level,
            fields=lc.candidate.reasoning[level].request_fields(),
            gates_dir=preflight.gates_dir(ctx.loaded),
            max_tokens=ps.max_tokens,
            timeout_s=ps.timeout_s,
            temperature=ps.temperature,
            window=preflight.window(lc),
        )
        r = await run_gate(gate, gctx)
        out.append(_as_control(r, f"control-preflight-{r.gate}"))
    return out


async def _control_lane(
    ctx: StageContext,
    gates: list[Any],
    control_level: str,
    tasks: list[tuple[str, str, GateResult]],
    results: list[GateResult],
    bar: Any,
) -> None:
    """The control's lowest level: its preflight, then every task, named `control-<gate>`."""
    client = await ctx.client(CONTROL)
    pf = await _control_preflight(ctx, client, control_level)
    results.extend(pf)
    bar.advance(len(pf), note="quality control preflight")
    fields = ctx.lanes.loaded[CONTROL].candidate.reasoning[control_level].request_fields()
    for gate in gates:
        r = await run_gate(gate, _context(ctx, client, CONTROL, control_level, fields))
        tasks.append((CONTROL, gate.gate.id, r))
        results.append(_as_control(r, f"control-{r.gate}"))
        bar.advance(note=f"quality control {r.gate}")


@stage("quality")
async def quality(ctx: StageContext) -> StageResult:
    """Pass when every attempt of every task passes on every lane and level it runs at."""
    s = ctx.candidate.stages.quality
    gates, problems = select(ctx.loaded)
    levels = list(ctx.candidate.reasoning)
    budgets = report.task_budgets(gates, s.budget_scale)
    ran = Record(
        levels=levels,
        scope=report.scope(gates, levels),
        budget_scale=s.budget_scale,
        budgets=budgets,
        gate_files={g.gate.id: g.sha256 for g in gates},
        declared_gate_files=declared("quality"),
    )
    if problems or not gates:
        why = problems or ["no task files in gates/quality/"]
        bad = GateResult(gate="gate-files", stage="quality", verdict=Verdict.ERROR, reasons=why)
        return finish(ctx, [bad], ran)
    for line in report.budget_lines(budgets, s.budget_scale):
        ctx.progress.say(line)
    control_level, why_not = control_plan(ctx)
    pf_count = len(preflight.select(ctx.loaded)[0]) if control_level else 0
    total = len(levels) * len(gates) + (pf_count + len(gates) if control_level else 0)
    tasks: list[tuple[str, str, GateResult]] = []
    results: list[GateResult] = []
    with ctx.progress.task("quality", total) as bar:
        client = await ctx.client("candidate")
        for level, lv in ctx.candidate.reasoning.items():
            for gate in gates:
                r = await run_gate(
                    gate, _context(ctx, client, "candidate", level, lv.request_fields())
                )
                tasks.append(("candidate", gate.gate.id, r))
                results.append(r)
                bar.advance(note=f"quality {r.key}")
        if control_level is not None:
            await _control_lane(ctx, gates, control_level, tasks, results, bar)
    where = ctx.attempt.path.relative_to(ctx.run.path).as_posix()
    summary = report.summarise(tasks, {g.gate.id: g.gate.attempts for g in gates}, where)
    control = Control(
        ran=control_level is not None,
        level=control_level,
        why_not=why_not or None,
        preflight={
            r.gate.removeprefix("control-preflight-"): r.verdict
            for r in results
            if r.gate.startswith("control-preflight-")
        },
    )
    record = ran.model_copy(
        update={
            "totals": summary.totals,
            "lines": summary.lines,
            "table": summary.table,
            "failures": summary.failures,
            "control": control,
        }
    )
    for line in record.lines:
        ctx.progress.say(line)
    return finish(ctx, results, record)
