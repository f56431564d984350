"""Conclude a run: policy over every verdict, tickets, the record, the document, the signature."""

from __future__ import annotations

import json
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from qualify._version import __version__
from qualify.candidate import Candidate
from qualify.decision import document, statement, waivers
from qualify.decision.policy import evaluate
from qualify.decision.reading import (
    DECISION,
    Listing,
    candidate_as_run,
    evidence_listing,
    run_info,
    stage_attempts,
    stage_names,
)
from qualify.decision.record import DecisionRecord, Evaluation, GateOutcome, TicketRef
from qualify.decision.settings import Policy
from qualify.decision.signing import canonical, load_private, sha256_bytes
from qualify.errors import BadInput
from qualify.evidence.store import RunDir, utc_now
from qualify.records import Verdict
from qualify.tickets import LogEntry, Ticket, TicketStore, default_dir


def _base(info: dict[str, Any]) -> Path:
    """Paths in a candidate are relative to the candidate file's directory."""
    p = info.get("candidate_path")
    return Path(p).parent if p else Path.cwd()


def signing_key(key: str | None, cand: Candidate | None, info: dict[str, Any]) -> Path | None:
    """`--key`, else `signing.key` of the candidate (relative to the candidate file)."""
    if key:
        return Path(key).expanduser()
    if cand is not None and cand.signing.key:
        q = Path(cand.signing.key).expanduser()
        return q if q.is_absolute() else _base(info) / q
    return None


def ticket_store(policy: Policy, info: dict[str, Any]) -> TicketStore:
    if policy.tickets_dir:
        q = Path(policy.tickets_dir).expanduser()
        return TicketStore(q if q.is_absolute() else _base(info) / q)
    return TicketStore(default_dir(_base(info)))


def _acceptance(gate: str, candidate: str, policy_sha: str) -> str:
    return (
        f"{gate} passes in the authoritative attempt of a fresh run of {candidate}, under the "
        f"policy with sha256 {policy_sha[:16]}, and the signed decision of that run verifies."
    )


def _blocking(ev: Evaluation) -> list[tuple[str, GateOutcome | None]]:
    items: list[tuple[str, GateOutcome | None]] = [
        (g.key, g) for g in ev.gates if g.status in ("blocks", "vetoes")
    ]
    return items + [(p, None) for p in ev.missing]


def _tickets(
    store: TicketStore, ev: Evaluation, run_id: str, candidate: str, policy_sha: str
) -> list[TicketRef]:
    """Open or append a ticket for every blocking gate; list the candidate's other tickets."""
    refs: dict[str, TicketRef] = {}
    for key, g in _blocking(ev):
        entry = LogEntry(
            run=run_id,
            stage_attempt=g.authoritative.attempt if g else None,
            verdict=g.verdict.value if g else "missing",
            reasons=g.reasons if g else [next(r for r in ev.reasons if r.startswith(key))],
            at=utc_now(),
        )
        t, action = store.record(candidate, key, entry, _acceptance(key, candidate, policy_sha))
        refs[t.id] = _ref(t, action)
    for t in store.all():
        if t.candidate == candidate and t.id not in refs:
            refs[t.id] = _ref(t, "listed")
    return list(refs.values())


def _ref(t: Ticket, action: str) -> TicketRef:
    return TicketRef(
        id=t.id,
        title=t.title,
        status=t.status,
        gate=t.gate,
        opened=t.opened,
        closed=t.closed,
        fix=t.fix,
        attempts=len(t.attempts),
        action=action,
    )


def _attempts(run: RunDir, planned: list[str]) -> dict[str, Any]:
    names = list(dict.fromkeys(planned + stage_names(run)))
    return {s: stage_attempts(run, s) for s in names}


def _private_key(run: RunDir, key_path: Path | None) -> Ed25519PrivateKey | None:
    """The signing key, checked before anything is written; it must live outside the evidence."""
    if key_path is None:
        return None
    if run.path.parent.parent.resolve() in key_path.resolve().parents:
        raise BadInput(
            f"{key_path} is inside the evidence root",
            ["key: expected a private key kept outside the evidence (it must never enter it)"],
        )
    return load_private(key_path)


def _evaluate(run: RunDir, info: dict[str, Any], cand: Candidate | None) -> _Inputs:
    policy = cand.policy if cand is not None else Policy()
    name = str(info.get("candidate") or (cand.name if cand else run.candidate_name))
    planned = list(info.get("stages") or (cand.stages.run if cand else stage_names(run)))
    store = ticket_store(policy, info)
    checked = waivers.check_all(policy, _base(info), store, name)
    waived = {c.check.gate: c.check.path for c in checked if c.check.accepted and c.check.gate}
    ev = evaluate(planned, _attempts(run, planned), policy, waived)
    return _Inputs(name, policy, store, checked, ev)


@dataclass
class _Inputs:
    name: str
    policy: Policy
    store: TicketStore
    checked: list[waivers.Checked]
    ev: Evaluation


def _record(
    run: RunDir, info: dict[str, Any], x: _Inputs, n: int, listing: Listing
) -> DecisionRecord:
    ev = x.ev
    if listing.integrity:
        ev.reasons += [f"evidence integrity: {p}" for p in listing.integrity]
        ev.promote, ev.verdict = False, Verdict.ERROR
    policy_dump = x.policy.model_dump(mode="json")
    policy_sha = sha256_bytes(canonical(policy_dump))
    return DecisionRecord(
        run_id=run.run_id,
        candidate=x.name,
        attempt=n,
        decision="promote" if ev.promote else "no-promote",
        decided_at=utc_now(),
        tool_version=__version__,
        evaluation=ev,
        policy=policy_dump,
        policy_sha256=policy_sha,
        candidate_path=info.get("candidate_path"),
        candidate_sha256=info.get("candidate_sha256"),
        evidence_root=listing.root,
        evidence_files=len(listing.files),
        unsealed=listing.unsealed,
        integrity=listing.integrity,
        tickets=_tickets(x.store, ev, run.run_id, x.name, policy_sha),
        waivers=[c.check for c in x.checked],
    )


def conclude(run: RunDir, key: str | None) -> DecisionRecord:
    """Decide, write the decision attempt, seal it, and sign it when a key is configured."""
    info = run_info(run)
    cand = candidate_as_run(run, info)
    priv = _private_key(run, signing_key(key, cand, info))  # a bad key: nothing written
    inputs = _evaluate(run, info, cand)
    attempt = run.new_attempt(DECISION)
    try:
        listing = evidence_listing(run, skip={statement.attempt_rel(attempt.number)})
        for i, c in enumerate(inputs.checked, 1):
            if c.raw is not None:  # the waiver itself becomes evidence of this decision
                c.check.evidence = attempt.write_bytes(f"waiver-{i:02d}.json", c.raw)[0]
        record = _record(run, info, inputs, attempt.number, listing)
        attempt.write_bytes("decision.json", _dump(record))
        attempt.write_bytes("decision.md", document.render(run, record, info).encode())
        attempt.write_bytes(statement.STATEMENT, statement.build(run, record, listing, info))
    except Exception:
        attempt.write_text("traceback.txt", traceback.format_exc())
        raise
    finally:
        attempt.seal()
    if priv is not None:
        statement.sign_attempt(run, attempt.number, priv)
    return record


def _dump(record: DecisionRecord) -> bytes:
    return (json.dumps(record.model_dump(mode="json"), indent=1) + "\n").encode()


def latest(run: RunDir) -> DecisionRecord | None:
    dirs = run.attempt_dirs(DECISION)
    for d in reversed(dirs):
        f = d / "decision.json"
        if f.is_file():
            return DecisionRecord.model_validate_json(f.read_text())
    return None


def covers_run(run: RunDir, record: DecisionRecord) -> bool:
    """Whether the evidence on disk is still exactly what this decision was made from."""
    now = evidence_listing(run, skip={statement.attempt_rel(record.attempt)})
    later = [d for d in run.attempt_dirs(DECISION) if d.name > f"attempt-{record.attempt:03d}"]
    return now.root == record.evidence_root and not now.unsealed and not later


def sign(run: RunDir, key: Path) -> tuple[Path, DecisionRecord]:
    """Sign the latest decision if it still covers the run and is unsigned; else decide anew."""
    priv: Ed25519PrivateKey = load_private(key)
    record = latest(run)
    if record is not None and covers_run(run, record):
        env = statement.envelope_path(run, record.attempt)
        if env.exists():
            return env, record
        return statement.sign_attempt(run, record.attempt, priv), record
    record = conclude(run, str(key))
    return statement.envelope_path(run, record.attempt), record
