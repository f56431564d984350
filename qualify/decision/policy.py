"""Policy over every verdict: required gates pass, critical ones veto, worst-of, every reason.

The authoritative attempt of a stage is its last finished attempt; every other attempt is listed
as superseded. A required pattern that matches no gate is a missing gate, and no-promote; so is
a reasoning level the policy requires that a levelled stage has no gate at. A waived gate is
`waived`, never `pass`: it is left out of the worst-of and named in the verdict line.
"""

from __future__ import annotations

from fnmatch import fnmatchcase

from qualify.present.reading import StageView
from qualify.present.record import (
    AttemptRef,
    Evaluation,
    GateOutcome,
    GateStatus,
    GateVerdict,
    StageOutcome,
)
from qualify.records import GateResult, StageResult, Verdict, worst
from qualify.trust.house import PolicyRules

StageAttempts = list[StageView]


def authoritative(attempts: StageAttempts) -> StageView | None:
    finished = [a for a in attempts if a.result is not None and a.result.status == "finished"]
    return finished[-1] if finished else None


def stage_outcome(stage: str, planned: bool, attempts: StageAttempts) -> StageOutcome:
    auth = a.result if (a := authoritative(attempts)) else None
    kept = {"status", "verdict", "reasons", "started_at", "ended_at"}
    others = [
        AttemptRef(attempt=x.number, **x.result.model_dump(include=kept))
        if x.result
        else AttemptRef(attempt=x.number, status="no result", reasons=["no result.json"])
        for x in attempts
        if auth is None or x.number != auth.attempt
    ]
    if auth is None:
        n, last = (attempts[-1].number, attempts[-1].result) if attempts else (0, None)
        said = "; ".join(last.reasons) if last is not None else "no result.json"
        why = f"no attempt finished (attempt {n} aborted: {said or 'no reason recorded'})"
        why = why if attempts else "no attempt was recorded"
        why = why if planned else "not listed in stages.run"
        return StageOutcome(stage=stage, planned=planned, ran=False, why_not=why, superseded=others)
    skipped = auth.verdict is Verdict.SKIPPED and not auth.gates
    why_not = None
    if skipped:
        why_not = "; ".join(r.removeprefix("not run: ") for r in auth.reasons) or "skipped"
    return StageOutcome(
        stage=stage,
        planned=planned,
        ran=not skipped,
        why_not=why_not,
        authoritative=AttemptRef(attempt=auth.attempt, **auth.model_dump(include=kept)),
        superseded=others,
    )


def gate_outcome(
    g: GateResult,
    auth_attempt: int,
    history: StageAttempts,
    policy: PolicyRules,
    waiver: str | None,
) -> GateOutcome:
    critical = g.critical or any(fnmatchcase(g.key, p) for p in policy.critical)
    required = critical or (
        g.severity == "required" and any(fnmatchcase(g.key, p) for p in policy.required)
    )
    earlier = []
    for a in history:
        if a.number == auth_attempt:
            continue
        found = next((x for x in a.result.gates if x.key == g.key), None) if a.result else None
        earlier.append(GateVerdict(attempt=a.number, verdict=found.verdict if found else None))
    status: GateStatus = "vetoes" if critical else "blocks"
    if g.verdict is Verdict.PASS or not required:
        status = "pass" if g.verdict is Verdict.PASS else "advisory"
    elif g.verdict is Verdict.INCONCLUSIVE and waiver is not None:
        status = "waived"
    return GateOutcome(
        key=g.key,
        **g.model_dump(include={"stage", "gate", "level", "verdict", "reasons", "metrics"}),
        required=required,
        critical=critical,
        status=status,
        authoritative=GateVerdict(attempt=auth_attempt, verdict=g.verdict),
        superseded=earlier,
        tries=g.attempts,
        waiver=waiver if status == "waived" else None,
    )


def _reasons(
    stages: list[StageOutcome],
    gates: list[GateOutcome],
    attempts: dict[str, StageAttempts],
    policy: PolicyRules,
) -> tuple[list[str], list[str], list[StageResult]]:
    """Why the decision cannot promote, the required patterns no gate matches, and the required
    stages that ran, did not pass and have no gate to show for it (they broke early). A gate
    file the project declares for a required stage that the run did not run, or ran changed, is
    a reason: the candidate chose a subset or its own gate files, so the stage does not count."""
    keys = [o.key for o in gates]
    missing = [p for p in policy.required if not any(fnmatchcase(k, p) for k in keys)]
    broken, undeclared = [], []
    for s in stages:
        found = authoritative(attempts.get(s.stage, []))
        pats = policy.required + policy.critical
        if found is None or not any(fnmatchcase(s.stage, p.split("/", 1)[0]) for p in pats):
            continue
        res = found.result
        if s.ran and res is not None and not res.gates and res.verdict is not Verdict.PASS:
            broken.append(res)
        if not found.reads:
            undeclared.append(f"{s.stage}: its record does not read, so its gate files are unknown")
            continue
        want = getattr(found.record, "declared_gate_files", None) or {}
        ran = getattr(found.record, "gate_files", None) or {}
        for gid, digest in sorted(want.items()):
            if gid not in ran:
                undeclared.append(
                    f"{s.stage}/{gid}: declared by the project's gate files, but not run"
                )
            elif ran[gid] != digest:
                undeclared.append(
                    f"{s.stage}/{gid}: the gate file run (sha256 {str(ran[gid])[:12]}) is not "
                    f"the project's (sha256 {str(digest)[:12]})"
                )
    reasons = [f"{r.stage}: {r.verdict.value}: " + "; ".join(r.reasons) for r in broken]
    reasons += [
        f"{o.key}: {'critical gate vetoes' if o.status == 'vetoes' else 'required gate'}: "
        f"{o.verdict.value}: {'; '.join(o.reasons) or 'no reason recorded'}"
        for o in gates
        if o.status in ("blocks", "vetoes")
    ]
    for m in missing:
        part = m.split("/", 1)[0]
        idle = [
            f"{x.stage} not run: {x.why_not}"
            for x in stages
            if not x.ran and fnmatchcase(x.stage, part)
        ]
        if not idle and not any(fnmatchcase(x.stage, part) for x in stages):
            idle = [f"{part}: not listed in stages.run"]
        reasons.append(
            f"{m}: required, but no gate matches" + (f" ({'; '.join(idle)})" if idle else "")
        )
    return reasons + undeclared, missing, broken


def evaluate(
    planned: list[str],
    attempts: dict[str, StageAttempts],
    policy: PolicyRules,
    waived: dict[str, str] | None = None,
) -> Evaluation:
    """The decision's verdict from every stage's attempts; `waived` maps gate key to waiver."""
    waived = waived or {}
    stages, gates = [], []
    for name in planned + sorted(set(attempts) - set(planned)):
        history = attempts.get(name, [])
        stages.append(stage_outcome(name, name in planned, history))
        auth = authoritative(history)
        if auth is not None and auth.result is not None:
            n = auth.result.attempt
            gates += [
                gate_outcome(g, n, history, policy, waived.get(g.key)) for g in auth.result.gates
            ]
    reasons, missing, broken = _reasons(stages, gates, attempts, policy)
    levels = []  # `stage/*@level`: a required level a levelled, required stage has no gate at
    for stage in dict.fromkeys(o.stage for o in gates if o.level is not None and o.required):
        have = {o.level for o in gates if o.stage == stage}
        levels += [f"{stage}/*@{lv}" for lv in policy.levels if lv not in have]
    reasons += [
        f"{m}: reasoning level {m.rsplit('@', 1)[1]} is required by the policy, but no "
        f"{m.split('/', 1)[0]} gate covers it"
        for m in levels
    ]
    notes = [
        f"{o.key}: advisory: {o.verdict.value}: " + ("; ".join(o.reasons) or "no reason recorded")
        for o in gates
        if o.status == "advisory" and o.verdict is not Verdict.PASS
    ]
    counted = [o.verdict for o in gates if o.required and o.status != "waived"]
    counted += [r.verdict for r in broken]
    verdict = worst(counted) if counted else Verdict.SKIPPED
    if reasons and verdict is Verdict.PASS:
        verdict = Verdict.SKIPPED  # something required is missing: never a pass
    return Evaluation(
        promote=not reasons and verdict is Verdict.PASS,
        verdict=verdict,
        reasons=reasons,
        notes=notes,
        stages=stages,
        gates=gates,
        missing=missing + levels,
        waived=[o.key for o in gates if o.status == "waived"],
    )
