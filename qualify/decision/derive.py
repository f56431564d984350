"""The one decision record, derived from evidence and policy alone.

`derive()` is the only place a `DecisionRecord` is built: `conclude` writes what it returns (and
adds the tickets it opened), `render` previews with it, and `verify` calls it again on the signed
files under the signed policy and refuses a statement that does not match. It reads only what
the `Listing` names (sealed attempts, plus the attempts that were still open), so the same
listing gives the same record on any machine.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from qualify.decision.policy import StageAttempts, evaluate
from qualify.evidence.listing import Listing, attempt_number
from qualify.evidence.store import RESULT, RunDir
from qualify.present.reading import DECISION
from qualify.present.record import DecisionRecord, Evaluation, HouseRef, WaiverCheck
from qualify.records import StageResult, Verdict
from qualify.trust.house import PolicyRules

_NOT_STAGES = {DECISION, "run"}


@dataclass
class Basis:
    """Everything besides the evidence that a decision is derived from."""

    rules: PolicyRules
    house: HouseRef
    attempt: int
    decided_at: str
    tool_version: str
    waivers: list[WaiverCheck] = field(default_factory=list)
    candidate_copy: str | None = None
    record_attempt: str | None = None


def _stage_of(attempt_rel: str) -> str:
    return attempt_rel.split("/", 1)[0]


def stage_attempts(run: RunDir, listing: Listing, planned: list[str]) -> dict[str, StageAttempts]:
    """Every listed attempt of every stage, with its result (None when open or without one)."""
    sealed = listing.attempts()
    with_result = {a for a in sealed if f"{a}/{RESULT}" in listing.files}
    stages = list(planned) + sorted(
        {_stage_of(a) for a in with_result} - set(planned) - _NOT_STAGES
    )
    out: dict[str, StageAttempts] = {}
    for stage in stages:
        dirs = sorted(
            {a for a in sealed | set(listing.unsealed) if _stage_of(a) == stage},
            key=attempt_number,
        )
        out[stage] = [(attempt_number(a), _result(run, a, a in with_result)) for a in dirs]
    return out


def _result(run: RunDir, attempt_rel: str, listed: bool) -> StageResult | None:
    if not listed:
        return None
    try:
        return StageResult.model_validate_json((run.path / attempt_rel / RESULT).read_text())
    except (OSError, ValidationError):
        return None


NOT_QUALIFIED = "not qualified"
_EARLIER = re.compile(r"^(?:not run: )?the run was aborted earlier \((.*)\)$", re.S)


def judged(ev: Evaluation) -> bool:
    """Whether the run judged the candidate at all: some stage finished, or some gate said pass
    or fail. A run where every stage aborted or was not run, and no gate judged, never
    qualified anything, whatever its policy concludes."""
    return any(s.ran for s in ev.stages) or any(
        g.verdict in (Verdict.PASS, Verdict.FAIL) for g in ev.gates
    )


def stop_reason(ev: Evaluation) -> str | None:
    """The reason the run stopped, said once: the first aborted stage attempt's own reason (the
    stages after it only say "the run was aborted earlier (...)", which is unwrapped)."""
    found: list[str] = []
    for s in ev.stages:
        for a in [*s.superseded, *([s.authoritative] if s.authoritative else [])]:
            if a.status != "aborted" or not a.reasons:
                continue
            text = a.reasons[0]
            m = _EARLIER.match(text)
            if m is None:
                return text
            found.append(m.group(1))
    return found[0] if found else None


def cause_of(reason: str) -> str:
    """The cause in words: a stop reason up to its first `;` (ServerProcess.death's shape)."""
    return reason.split(";", 1)[0].strip()


def headline(ev: Evaluation, waivers: list[WaiverCheck]) -> str:
    """The verdict line: `promote`, `promote with N waiver(s) (...)`, `no-promote`, or
    `not qualified: <cause>` when no gate judged the candidate (every stage aborted or not run);
    the record's `decision` stays no-promote then, so no alias moves."""
    if not ev.promote and not judged(ev):
        why = stop_reason(ev)
        return f"{NOT_QUALIFIED}: {cause_of(why) if why else 'no stage reached a judged gate'}"
    if not ev.promote:
        return "no-promote"
    if not ev.waived:
        return "promote"
    by_gate = {w.gate: w for w in waivers if w.accepted}
    parts = []
    for key in ev.waived:
        w = by_gate.get(key)
        who = f", waived by {w.signer} until {w.expires}" if w else ""
        parts.append(f"{key} inconclusive{who}")
    n = len(ev.waived)
    return f"promote with {n} waiver{'s' if n > 1 else ''} ({'; '.join(parts)})"


def derive(run: RunDir, listing: Listing, info: dict[str, Any], basis: Basis) -> DecisionRecord:
    """The decision record of `run` from the listed evidence under `basis.rules`."""
    planned = [str(s) for s in info.get("stages") or []]
    waived = {c.gate: c.path for c in basis.waivers if c.accepted and c.gate}
    ev = evaluate(planned, stage_attempts(run, listing, planned), basis.rules, waived)
    if listing.integrity:
        ev.reasons += [f"evidence integrity: {p}" for p in listing.integrity]
        ev.promote, ev.verdict = False, Verdict.ERROR
    copy = basis.candidate_copy
    return DecisionRecord(
        run_id=run.run_id,
        candidate=str(info.get("candidate") or run.candidate_name),
        attempt=basis.attempt,
        decision="promote" if ev.promote else "no-promote",
        headline=headline(ev, basis.waivers),
        decided_at=basis.decided_at,
        tool_version=basis.tool_version,
        evaluation=ev,
        policy=basis.rules.model_dump(mode="json"),
        policy_sha256=basis.rules.sha256,
        house=basis.house,
        candidate_path=info.get("candidate_path"),
        candidate_sha256=info.get("candidate_sha256"),
        candidate_copy=copy if copy and (run.path / copy).is_file() else None,
        record_attempt=basis.record_attempt,
        evidence_root=listing.root,
        evidence_files=len(listing.files),
        unsealed=listing.unsealed,
        integrity=listing.integrity,
        waivers=basis.waivers,
    )


def comparable(record: DecisionRecord | dict[str, Any]) -> dict[str, Any]:
    """What verify holds a signed decision to: decision, verdict, reasons, every gate's status."""
    r = record.model_dump(mode="json") if isinstance(record, DecisionRecord) else record
    ev = r.get("evaluation") or {}
    return {
        "decision": r.get("decision"),
        "headline": r.get("headline"),
        "verdict": ev.get("verdict"),
        "reasons": ev.get("reasons"),
        "missing": ev.get("missing"),
        "waived": ev.get("waived"),
        "gates": [(g["key"], g["verdict"], g["status"]) for g in ev.get("gates") or []],
        "policy_sha256": r.get("policy_sha256"),
    }


def copy_path(run: RunDir, name: str, record_attempt: str | None) -> str | None:
    """`run/attempt-NNN/<name>` of the invocation that made the decision (else the latest)."""
    dirs = [run.path / record_attempt] if record_attempt else []
    dirs += list(reversed(run.attempt_dirs("run")))
    for d in dirs:
        if (d / name).is_file():
            return (d / name).relative_to(run.path).as_posix()
    return None
