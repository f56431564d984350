"""Preflight: every gate in `gates/`, once per reasoning level, through the server's parsers."""

from __future__ import annotations

from pathlib import Path

from qualify.candidate import Candidate, LoadedCandidate, resolve_path
from qualify.gates.files import LoadedGate, declared, default_gates_dir, load_gates, pick
from qualify.gates.probe import GateContext, Keep, Sender, Write
from qualify.gates.runner import run_gate
from qualify.preflight.budget import allowance
from qualify.preflight.code import check_code
from qualify.preflight.record import Allowance, Record
from qualify.records import GateResult, StageResult, Verdict
from qualify.stage import StageContext, finish, validator

DEFAULT_GATES = default_gates_dir()


def gates_dir(loaded: LoadedCandidate) -> Path:
    """`stages.preflight.gates_dir` relative to the candidate file, else the project's `gates/`."""
    rel = loaded.candidate.stages.preflight.gates_dir
    return resolve_path(loaded, rel) if rel else DEFAULT_GATES


def select(loaded: LoadedCandidate) -> tuple[list[LoadedGate], list[str]]:
    """The gates the candidate names (all when it names none), and every problem found."""
    where = gates_dir(loaded)
    gates, problems = load_gates(where)
    field = f"{loaded.path}: stages.preflight.gates"
    chosen, unknown = pick(gates, loaded.candidate.stages.preflight.gates, field, where)
    return chosen, problems + unknown


@validator
def _gate_files(loaded: LoadedCandidate) -> list[str]:
    """`qualify validate`: the gate files the candidate names, their params and schema files."""
    if "preflight" not in loaded.candidate.stages.run:
        return []
    return select(loaded)[1]


def gate_context(
    candidate: Candidate,
    level: str,
    client: Sender,
    keep: Keep,
    write: Write,
    where: Path,
    allowance: bool = True,
) -> GateContext:
    """The context one gate runs in at `level`: the level's request fields and reasoning
    allowance, the candidate's preflight settings (`verify` builds it again from the signed
    candidate copy, with a client over the kept exchanges). `allowance` False gives the context
    of the control's preflight in quality records made before it ran by level (no allowance)."""
    settings = candidate.stages.preflight
    extra = allowances(candidate)[level] if allowance else Allowance(tokens=0, source="")
    return GateContext(
        client=client,
        keep=keep,
        write=write,
        model=candidate.identity.model,
        level=level,
        fields=candidate.reasoning[level].request_fields(),
        gates_dir=where,
        max_tokens=settings.max_tokens,
        timeout_s=settings.timeout_s,
        temperature=settings.temperature,
        window=candidate.identity.context_length,
        reasoning_tokens=extra.tokens,
        reasoning_source=extra.source,
    )


def allowances(candidate: Candidate) -> dict[str, Allowance]:
    """Each reasoning level's allowance (`budget.allowance`), as the record holds it."""
    s = candidate.stages.preflight
    return {
        level: Allowance(tokens=tokens, source=source)
        for level, f in candidate.reasoning.items()
        for tokens, source in [
            allowance(f.request_fields(), s.reasoning_tokens, level, s.reasoning_tokens_at)
        ]
    }


def _record(loaded: LoadedCandidate, gates: list[LoadedGate]) -> Record:
    return Record(
        levels=list(loaded.candidate.reasoning),
        reasoning_allowance=allowances(loaded.candidate),
        gates_dir=str(gates_dir(loaded)),
        gate_files={g.gate.id: g.sha256 for g in gates},
        declared_gate_files=declared("preflight"),
        check_code=check_code("preflight"),
    )


async def preflight(ctx: StageContext) -> StageResult:
    """Pass when every gate passes at every reasoning level; each attempt kept as evidence."""
    gates, problems = select(ctx.loaded)
    where = gates_dir(ctx.loaded)
    if problems:
        bad = GateResult(
            gate="gate-files", stage="preflight", verdict=Verdict.ERROR, reasons=problems
        )
        return finish(ctx, [bad], _record(ctx.loaded, gates))
    client = await ctx.client()
    results: list[GateResult] = []
    levels = ctx.candidate.reasoning
    with ctx.progress.task("preflight", len(levels) * len(gates)) as task:
        for level in levels:
            for gate in gates:
                gctx = gate_context(
                    ctx.candidate, level, client, ctx.keep, ctx.attempt.write_json, where
                )
                result = await run_gate(gate, gctx)
                ctx.log.info("gate.end", gate=result.key, verdict=result.verdict.value)
                results.append(result)
                task.advance(note=f"preflight {result.key}")
    return finish(ctx, results, _record(ctx.loaded, gates))
