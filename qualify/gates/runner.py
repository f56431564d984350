"""Running gates as their files declare them.

`run_gate` runs one probe gate (preflight, quality): its declared attempts, each one evidence,
combined into a `GateResult`. `judge_stage` runs every judge gate a stage's files declare over
what the stage measured.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from qualify.gates.files import LoadedGate, load_gates
from qualify.gates.probe import GateContext
from qualify.gates.registry import CHECKS, Judged, Outcome, load_checks
from qualify.gates.thresholds import Thresholds
from qualify.records import AttemptRecord, GateResult, Verdict, worst
from qualify.registry import record_model


async def run_gate(
    gate: LoadedGate, ctx: GateContext, before: Callable[[int], None] | None = None
) -> GateResult:
    """Every declared attempt must pass. After an `error` the rest are not run (and say so):
    the harness could not judge, and retrying would only hide that. `before(n)` is called as
    attempt `n` starts (`verify` hands each attempt the exchanges it kept)."""
    load_checks()
    g, spec = gate.gate, CHECKS[gate.gate.check]
    records: list[AttemptRecord] = []
    for n in range(1, g.attempts + 1):
        ctx.attempt, ctx.files, ctx.gate = n, [], g.id
        if before is not None:
            before(n)
        t0 = time.perf_counter()
        try:
            out: Outcome = await spec.fn(ctx, gate.params)
        except Exception as exc:  # a bug in a check is the harness's fault: `error`, never a pass
            out = Outcome.errored(f"internal error in check {spec.name}: {exc!r}")
        metrics = {**out.metrics, "wall_s": round(time.perf_counter() - t0, 3)}
        records.append(
            AttemptRecord(
                number=n,
                verdict=out.verdict,
                reasons=out.reasons,
                files=list(ctx.files),
                metrics=metrics,
            )
        )
        if out.verdict is Verdict.ERROR:
            break
    bad = [r for r in records if r.verdict is not Verdict.PASS]
    reasons = [f"attempt {r.number}/{len(records)}: {why}" for r in bad for why in r.reasons]
    if len(records) == 1:
        reasons = list(bad[0].reasons) if bad else []
    if len(records) < g.attempts:
        reasons.append(f"attempts {len(records) + 1}-{g.attempts} not run after an error")
    return GateResult(
        gate=g.id,
        stage=g.stage,
        level=ctx.level,
        severity=g.severity,
        critical=g.critical,
        verdict=worst([r.verdict for r in records]),
        reasons=reasons,
        attempts=records,
        metrics=records[-1].metrics,
    )


def judge_gates(gates: list[LoadedGate], data: object, thresholds: Thresholds) -> list[GateResult]:
    """Every declared judge over the stage's data: its typed record (a table is read as one:
    `verify` judges again from rebuilt tables). A judge that raises is `error`, never a pass; a
    judge that returns nothing is `inconclusive` (it saw nothing to judge)."""
    load_checks()
    out: list[GateResult] = []
    for gate in gates:
        g, spec, model = gate.gate, CHECKS[gate.gate.check], record_model(gate.gate.stage)
        try:
            read = model.model_validate(data) if model and isinstance(data, dict) else data
            found: list[Judged] = spec.fn(read, gate.params, thresholds)
        except Exception as exc:  # a bug in a judge is the harness's fault
            found = [Judged(Verdict.ERROR, [f"internal error in check {spec.name}: {exc!r}"])]
        if not found:
            found = [Judged(Verdict.INCONCLUSIVE, ["nothing to judge: the stage measured nothing"])]
        out.extend(
            GateResult(
                gate=f"{g.id}@{j.part}" if j.part else g.id,
                stage=g.stage,
                severity=g.severity,
                critical=g.critical,
                verdict=j.verdict,
                reasons=list(j.reasons),
                attempts=[AttemptRecord(number=1, verdict=j.verdict, reasons=list(j.reasons))],
                metrics=dict(j.metrics),
            )
            for j in found
        )
    return out


def judge_stage(
    stage: str, gates_dir: Path, data: object, thresholds: Thresholds
) -> tuple[list[GateResult], list[str]]:
    """Load the stage's gate files and judge `data` with them; returns results and problems."""
    gates, problems = load_gates(gates_dir, stage)
    return judge_gates(gates, data, thresholds), problems
