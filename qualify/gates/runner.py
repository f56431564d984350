"""Running one gate: its declared attempts, each one evidence, combined into a `GateResult`."""

from __future__ import annotations

import time

from qualify.gates.files import LoadedGate
from qualify.gates.registry import CHECKS, Outcome, load_checks
from qualify.preflight.probe import GateContext
from qualify.records import AttemptRecord, GateResult, Verdict, worst


async def _attempt(gate: LoadedGate, ctx: GateContext) -> Outcome:
    spec = CHECKS[gate.gate.check]
    try:
        return await spec.fn(ctx, gate.params)
    except Exception as exc:  # a bug in a check is the harness's fault: `error`, never a pass
        return Outcome.errored(f"internal error in check {spec.name}: {exc!r}")


def _reasons(records: list[AttemptRecord]) -> list[str]:
    bad = [r for r in records if r.verdict is not Verdict.PASS]
    if len(records) == 1:
        return list(bad[0].reasons) if bad else []
    return [f"attempt {r.number}/{len(records)}: {why}" for r in bad for why in r.reasons]


async def run_gate(gate: LoadedGate, ctx: GateContext) -> GateResult:
    """Every declared attempt must pass. After an `error` the rest are not run (and say so):
    the harness could not judge, and retrying would only hide that."""
    load_checks()
    g = gate.gate
    records: list[AttemptRecord] = []
    for n in range(1, g.attempts + 1):
        ctx.attempt, ctx.files, ctx.gate = n, [], g.id
        t0 = time.perf_counter()
        out = await _attempt(gate, ctx)
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
    reasons = _reasons(records)
    if len(records) < g.attempts:
        reasons.append(f"attempts {len(records) + 1}-{g.attempts} not run after an error")
    return GateResult(
        gate=g.id,
        stage=g.stage,
        level=ctx.level,
        severity=g.severity,
        verdict=worst([r.verdict for r in records]),
        reasons=reasons,
        attempts=records,
        metrics=records[-1].metrics,
    )
