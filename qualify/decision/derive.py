"""The one decision record, derived from evidence and policy alone.

`derive()` is the only place a `DecisionRecord` is built: `conclude` writes what it returns (and
adds the tickets it opened), `render` previews with it, and `verify` calls it again on the signed
files under the signed policy and refuses a statement that does not match. It reads the run
only through its `RunView` (what the `Listing` names: sealed attempts, plus the attempts that
were still open), so the same listing gives the same record on any machine.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from qualify.decision.policy import evaluate
from qualify.evidence.store import RESULT
from qualify.present.reading import DECISION, RunView
from qualify.present.record import DecisionRecord, Evaluation, HouseRef, WaiverCheck
from qualify.records import Verdict
from qualify.trust.house import PolicyRules


@dataclass
class Basis:
    """Everything besides the evidence that a decision is derived from."""

    rules: PolicyRules
    house: HouseRef
    attempt: int
    decided_at: str
    tool_version: str
    waivers: list[WaiverCheck] = field(default_factory=list)
    record_attempt: str | None = None


NOT_QUALIFIED = "not qualified"
_EARLIER = re.compile(r"^(?:not run: )?the run was aborted earlier \((.*)\)$", re.S)


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


def derive(view: RunView, basis: Basis) -> DecisionRecord:
    """The decision record of the run `view` read, from its listed evidence under `basis.rules`."""
    run, listing, info = view.run, view.listing, view.info
    planned = [str(s) for s in info.get("stages") or []]
    waived = {c.gate: c.path for c in basis.waivers if c.accepted and c.gate}
    results = {a.split("/", 1)[0] for a in listing.attempts() if f"{a}/{RESULT}" in listing.files}
    stages = planned + sorted(results - set(planned) - {DECISION, "run"})
    ev = evaluate(planned, {s: view.attempts.get(s, []) for s in stages}, basis.rules, waived)
    if listing.integrity:
        ev.reasons += [f"evidence integrity: {p}" for p in listing.integrity]
        ev.promote, ev.verdict = False, Verdict.ERROR
    # the verdict line: `promote`, `promote with N waiver(s) (...)`, `no-promote`, or `not
    # qualified: <cause>` when no gate judged the candidate (every stage aborted or not run, and
    # no gate said pass or fail): the decision stays no-promote then, so no alias moves
    judged = any(s.ran for s in ev.stages) or any(
        g.verdict in (Verdict.PASS, Verdict.FAIL) for g in ev.gates
    )
    headline = "promote" if ev.promote else "no-promote"
    if not ev.promote and not judged:
        why = stop_reason(ev)  # the cause: up to its first `;` (ServerProcess.death)
        headline = f"{NOT_QUALIFIED}: " + (
            why.split(";", 1)[0].strip() if why else "no stage reached a judged gate"
        )
    elif ev.promote and ev.waived:
        by_gate = {w.gate: w for w in basis.waivers if w.accepted}
        said = [(key, by_gate.get(key)) for key in ev.waived]
        parts = [
            f"{k} inconclusive" + (f", waived by {w.signer} until {w.expires}" if w else "")
            for k, w in said
        ]
        n = len(ev.waived)
        headline = f"promote with {n} waiver{'s' if n > 1 else ''} ({'; '.join(parts)})"
    return DecisionRecord(
        run_id=run.run_id,
        candidate=str(info.get("candidate") or run.candidate_name),
        attempt=basis.attempt,
        decision="promote" if ev.promote else "no-promote",
        headline=headline,
        decided_at=basis.decided_at,
        tool_version=basis.tool_version,
        evaluation=ev,
        policy=basis.rules.model_dump(mode="json"),
        policy_sha256=basis.rules.sha256,
        house=basis.house,
        candidate_path=info.get("candidate_path"),
        candidate_sha256=info.get("candidate_sha256"),
        candidate_copy=view.copy,
        record_attempt=basis.record_attempt,
        evidence_root=listing.root,
        evidence_files=len(listing.files),
        unsealed=listing.unsealed,
        integrity=listing.integrity,
        waivers=basis.waivers,
    )


def comparable(record: DecisionRecord) -> dict[str, object]:
    """What verify holds a signed decision to: decision, verdict, reasons, every gate's status."""
    ev = record.evaluation
    return {
        "decision": record.decision,
        "headline": record.headline,
        "verdict": ev.verdict.value,
        "reasons": ev.reasons,
        "missing": ev.missing,
        "waived": ev.waived,
        "gates": [(g.key, g.verdict.value, g.status) for g in ev.gates],
        "policy_sha256": record.policy_sha256,
    }
