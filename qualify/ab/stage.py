"""A/B: the candidate against its control, in turn, on the same prompts, budget and boundaries.

Runs alternate A B A B ..., one lane's server at a time, so drift spreads over both lanes; the
figures and the paired statistic are `qualify.ab.table.metric_rows`' (docs/ab.md)."""

from __future__ import annotations

from pathlib import Path
from typing import cast

from qualify.ab import drive, kv
from qualify.ab.prompts import PromptSet, load_prompts, shipped_path
from qualify.ab.record import LANES, Energy, Kv, Lane, LaneEnergy, LaneRuns, Record
from qualify.ab.settings import ABSettings
from qualify.candidate import Candidate, LoadedCandidate, resolve_path
from qualify.errors import BadInput
from qualify.records import StageResult
from qualify.serving.dialects import dialect
from qualify.serving.idle import scrape
from qualify.stage import StageContext, finish, validator
from qualify.vram.energy import NO_TELEMETRY, window_energy
from qualify.vram.sampler import gpu_note, parts_of


def prompt_path(loaded: LoadedCandidate) -> Path:
    rel = loaded.candidate.stages.ab.prompts
    return resolve_path(loaded, rel) if rel else shipped_path()


def level_fields(cand: Candidate, s: ABSettings) -> dict[str, object]:
    """The request fields of the A/B's reasoning level: the named one, else the first."""
    if not cand.reasoning:
        return {}
    name = s.level or next(iter(cand.reasoning))
    return cand.reasoning[name].request_fields()


@validator
def check_ab(loaded: LoadedCandidate) -> list[str]:
    """The prompt file loads and is real text; the named reasoning level exists."""
    cand = loaded.candidate
    if "ab" not in cand.stages.run:
        return []
    s = cand.stages.ab
    problems = []
    if s.level is not None and s.level not in cand.reasoning:
        problems.append(
            f"stages.ab.level: {s.level!r} is not a reasoning level "
            f"(expected one of {sorted(cand.reasoning)})"
        )
    try:
        load_prompts(prompt_path(loaded))
    except BadInput as exc:
        problems.extend(f"stages.ab.prompts: {exc.headline}: {p}" for p in exc.problems)
    return problems


def _plan(cand: Candidate, ps: PromptSet, run: int, model: str) -> drive.RunPlan:
    s = cand.stages.ab
    base: dict[str, object] = {
        "model": model,
        "max_tokens": s.max_tokens,
        "temperature": s.temperature,
        "stream": True,
        "stream_options": {"include_usage": True},
        **level_fields(cand, s),
        **({} if s.seed is None else {"seed": s.seed}),
    }
    plan = drive.RunPlan(run, ps, base, s)
    plan.bodies = [plan.body(i, p.text) for i, p in enumerate(ps.prompts)]
    return plan


async def _drive(ctx: StageContext, ps: PromptSet) -> tuple[list[str], LaneRuns, dict[str, Kv]]:
    s = ctx.candidate.stages.ab
    order: list[str] = [lane for _ in range(s.runs) for lane in LANES]
    runs: LaneRuns = {lane: [] for lane in LANES}
    kvs: dict[str, Kv] = {}
    with ctx.progress.task("ab: paired runs", len(order)) as task:
        for i, lane in enumerate(order):
            run = i // len(LANES) + 1
            lc: Candidate = ctx.lanes.loaded[lane].candidate
            d = dialect(lc.identity.engine)
            client = await ctx.client(lane)
            plan = _plan(ctx.candidate, ps, run, lc.identity.model)
            parts = parts_of(ctx.sampler)
            record = await drive.drive_run(client, ctx.keep, lane, plan, d, _meter(ctx), parts)
            runs[lane].append(record)
            if lane not in kvs:
                snap = await scrape(client)
                proc = getattr(ctx.lanes, "process", None)  # None: attached, not launched
                log = kv.read_server_log(proc.attempt.path if proc is not None else None)
                kvs[lane] = kv.lane_kv(lc.identity.engine, d, snap, log)
            task.advance(1, f"ab: {lane} run {run}")
    return order, runs, kvs


def _meter(ctx: StageContext) -> drive.Meter:
    """Energy over a monotonic window from the run's GPU sampler; unmeasured, with why, when
    the run has no sampler (`qualify.vram.sampler.Sampler.energy` says why when it has one)."""
    energy = getattr(ctx.sampler, "energy", None)
    if callable(energy):
        return cast(drive.Meter, energy)
    why = f"{NO_TELEMETRY} (no sampler in this run)"
    return lambda t0, t1: window_energy({}, t0, t1) | {"why": why}


def lane_energy(runs: list[Energy | None]) -> LaneEnergy:
    """A lane's J per output token over its runs; unmeasured (the first why) unless all were."""
    energies = [e or Energy(why="no energy kept") for e in runs]
    tokens = sum(e.completion_tokens or 0 for e in energies)
    unmeasured = (e.why or "no energy kept" for e in energies if e.joules is None)
    why = next(unmeasured, None) if runs else "no timed run"
    joules = None if why else sum(e.joules or 0.0 for e in energies)
    per = joules / tokens if joules is not None and tokens else None
    return LaneEnergy(
        joules=joules, completion_tokens=tokens, j_per_output_token=per, runs=len(runs), why=why
    )


async def ab(ctx: StageContext) -> StageResult:
    """Both lanes in turn on the same requests; the gate files judge pairing, speed,
    acceptance, draft length and fidelity."""
    if not ctx.lanes.has("control"):
        why = "stages.ab.control is not set: there is no control lane to pair with"
        record = Record(runs=0, order=[], lanes={}, metrics=[], no_control=why)
        return finish(ctx, ctx.judge(record), record)
    s: ABSettings = ctx.candidate.stages.ab
    ps = load_prompts(prompt_path(ctx.loaded))
    order, runs_of, kvs = await _drive(ctx, ps)
    # What the rebuild (`qualify.ab.rebuild`) takes as recorded: the lanes' recipes, figures,
    # table, acceptance, lists and fidelity it derives from the kept exchanges.
    lanes = {
        lane: Lane(runs=runs, kv=kvs.get(lane), energy=lane_energy([r.energy for r in runs]))
        for lane, runs in runs_of.items()
    }
    data = {
        "runs": s.runs,
        "order": order,
        "settings": s.model_dump(mode="json"),
        "prompts": [{"id": p.id, "kind": p.kind} for p in ps.prompts],
        "prompt_file": str(prompt_path(ctx.loaded)),
        "lanes": lanes,
        # of this form: compared from the kept answers; each lane against its own runs where
        # a prompt repeats across runs (no nonce line)
        "lossless": None if s.nonce else {"repeats": None},
        "gpu": gpu_note(parts_of(ctx.sampler), ctx.thresholds.vram_reserve_gib),
    }
    record = Record.model_validate(data)
    return finish(ctx, ctx.judge(record), record)
