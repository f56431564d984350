"""Policy over every verdict: required gates pass, critical ones veto, worst-of, every reason.

The authoritative attempt of a stage is its last finished attempt; every other attempt is listed
as superseded. A required pattern that matches no gate is a missing gate, and no-promote; so is
a reasoning level the policy requires that a levelled stage has no gate at. A waived gate is
`waived`, never `pass`: it is left out of the worst-of and named in the verdict line.
"""

from __future__ import annotations

from fnmatch import fnmatchcase

from pydantic import ValidationError

from qualify.present.record import (
    AttemptRef,
    Evaluation,
    GateOutcome,
    GateStatus,
    GateVerdict,
    StageOutcome,
)
from qualify.records import GateResult, StageResult, Verdict, worst
from qualify.registry import parse_record
from qualify.trust.house import PolicyRules

StageAttempts = list[tuple[int, StageResult | None]]


def matches(key: str, patterns: list[str]) -> bool:
    return any(fnmatchcase(key, p) for p in patterns)


def _ref(number: int, res: StageResult | None) -> AttemptRef:
    if res is None:
        return AttemptRef(attempt=number, status="no result", reasons=["no result.json"])
    return AttemptRef(
        attempt=number,
        status=res.status,
        verdict=res.verdict,
        reasons=res.reasons,
        started_at=res.started_at,
        ended_at=res.ended_at,
    )


def authoritative(attempts: StageAttempts) -> StageResult | None:
    finished = [r for _, r in attempts if r is not None and r.status == "finished"]
    return finished[-1] if finished else None


def _why_not(planned: bool, attempts: StageAttempts) -> str:
    if not planned:
        return "not listed in stages.run"
    if not attempts:
        return "no attempt was recorded"
    n, last = attempts[-1]
    why = "; ".join(last.reasons) if last is not None else "no result.json"
    return f"no attempt finished (attempt {n} aborted: {why or 'no reason recorded'})"


def stage_outcome(stage: str, planned: bool, attempts: StageAttempts) -> StageOutcome:
    auth = authoritative(attempts)
    others = [_ref(n, r) for n, r in attempts if auth is None or n != auth.attempt]
    if auth is None:
        why = _why_not(planned, attempts)
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
        authoritative=_ref(auth.attempt, auth),
        superseded=others,
    )


def _status(g: GateResult, required: bool, critical: bool, waived: bool) -> GateStatus:
    if g.verdict is Verdict.PASS:
        return "pass"
    if not required:
        return "advisory"
    if g.verdict is Verdict.INCONCLUSIVE and waived:
        return "waived"
    return "vetoes" if critical else "blocks"


def gate_outcome(
    g: GateResult,
    auth_attempt: int,
    history: StageAttempts,
    policy: PolicyRules,
    waiver: str | None,
) -> GateOutcome:
    critical = g.critical or matches(g.key, policy.critical)
    required = critical or (g.severity == "required" and matches(g.key, policy.required))
    earlier = []
    for n, res in history:
        if n == auth_attempt:
            continue
        found = next((x for x in res.gates if x.key == g.key), None) if res else None
        earlier.append(GateVerdict(attempt=n, verdict=found.verdict if found else None))
    status = _status(g, required, critical, waiver is not None)
    return GateOutcome(
        key=g.key,
        stage=g.stage,
        gate=g.gate,
        level=g.level,
        verdict=g.verdict,
        required=required,
        critical=critical,
        status=status,
        reasons=g.reasons,
        metrics=g.metrics,
        authoritative=GateVerdict(attempt=auth_attempt, verdict=g.verdict),
        superseded=earlier,
        tries=g.attempts,
        waiver=waiver if status == "waived" else None,
    )


def _gate_reason(o: GateOutcome) -> str:
    why = "; ".join(o.reasons) or "no reason recorded"
    verb = {"vetoes": "critical gate vetoes", "blocks": "required gate"}[o.status]
    return f"{o.key}: {verb}: {o.verdict.value}: {why}"


def _stage_required(stage: str, policy: PolicyRules) -> bool:
    return any(fnmatchcase(stage, p.split("/", 1)[0]) for p in policy.required + policy.critical)


def _broken_stages(
    stages: list[StageOutcome], attempts: dict[str, StageAttempts]
) -> list[StageResult]:
    """Stages that ran, did not pass and have no gate to show for it: they broke early."""
    out = []
    for s in stages:
        res = authoritative(attempts.get(s.stage, []))
        if s.ran and res is not None and not res.gates and res.verdict is not Verdict.PASS:
            out.append(res)
    return out


def _missing(gates: list[GateOutcome], policy: PolicyRules) -> list[str]:
    keys = [o.key for o in gates]
    return [p for p in policy.required if not any(fnmatchcase(k, p) for k in keys)]


def _missing_reason(pattern: str, stages: list[StageOutcome]) -> str:
    part = pattern.split("/", 1)[0]
    idle = [
        f"{s.stage} not run: {s.why_not}"
        for s in stages
        if not s.ran and fnmatchcase(s.stage, part)
    ]
    if not idle and not any(fnmatchcase(s.stage, part) for s in stages):
        idle = [f"{part}: not listed in stages.run"]
    why = f" ({'; '.join(idle)})" if idle else ""
    return f"{pattern}: required, but no gate matches{why}"


def _uncovered_levels(gates: list[GateOutcome], policy: PolicyRules) -> list[str]:
    """`stage/*@level` for each required level a levelled, required stage has no gate at."""
    out = []
    for stage in dict.fromkeys(o.stage for o in gates if o.level is not None and o.required):
        have = {o.level for o in gates if o.stage == stage}
        out += [f"{stage}/*@{lv}" for lv in policy.levels if lv not in have]
    return out


def _undeclared(
    stages: list[StageOutcome], attempts: dict[str, StageAttempts], policy: PolicyRules
) -> list[str]:
    """Gate files the project declares for a required stage that the run did not run, or ran
    changed: the candidate chose a subset or its own gate files, so the stage does not count."""
    out = []
    for s in stages:
        res = authoritative(attempts.get(s.stage, []))
        if res is None or not _stage_required(s.stage, policy):
            continue
        try:
            want, ran = _gate_files(s.stage, res)
        except ValidationError:
            out.append(f"{s.stage}: its record does not read, so its gate files are unknown")
            continue
        for gid, digest in sorted(want.items()):
            if gid not in ran:
                out.append(f"{s.stage}/{gid}: declared by the project's gate files, but not run")
            elif ran[gid] != digest:
                out.append(
                    f"{s.stage}/{gid}: the gate file run (sha256 {str(ran[gid])[:12]}) is not "
                    f"the project's (sha256 {str(digest)[:12]})"
                )
    return out


def _gate_files(stage: str, res: StageResult) -> tuple[dict[str, str], dict[str, str]]:
    """The gate files (id to sha256) the stage's typed record says the project declares and
    the run ran; none for a stage whose record keeps no declared ones. A record that does not
    read raises (`ValidationError`)."""
    record = parse_record(stage, res.data)
    want = getattr(record, "declared_gate_files", None)
    ran = getattr(record, "gate_files", None)
    return (want if isinstance(want, dict) else {}), (ran if isinstance(ran, dict) else {})


def _worst_required(gates: list[GateOutcome], broken: list[StageResult], blocked: bool) -> Verdict:
    counted = [o.verdict for o in gates if o.required and o.status != "waived"]
    counted += [r.verdict for r in broken]
    verdict = worst(counted) if counted else Verdict.SKIPPED
    if blocked and verdict is Verdict.PASS:
        return Verdict.SKIPPED  # something required is missing: never a pass
    return verdict


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
        if auth is not None:
            n = auth.attempt
            gates += [gate_outcome(g, n, history, policy, waived.get(g.key)) for g in auth.gates]
    required_stages = [s for s in stages if _stage_required(s.stage, policy)]
    missing = _missing(gates, policy)
    levels = _uncovered_levels(gates, policy)
    broken = _broken_stages(required_stages, attempts)
    reasons = [f"{r.stage}: {r.verdict.value}: " + "; ".join(r.reasons) for r in broken]
    reasons += [_gate_reason(o) for o in gates if o.status in ("blocks", "vetoes")]
    reasons += [_missing_reason(p, stages) for p in missing]
    reasons += _undeclared(stages, attempts, policy)
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
    verdict = _worst_required(gates, broken, bool(reasons))
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
