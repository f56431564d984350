"""`qualify verify`: the signature, every subject on disk, then the verdict derived again.

1. the signature over the exact payload bytes, before anything is parsed;
2. every subject (all paths inside the run) re-hashed; files added to a signed attempt named;
3. the decision derived again (`derive`) from the signed evidence under the signed policy, the
   signed house rules tightened by the signed candidate copy, and the signed waiver copies
   judged again with this envelope's signer: a statement whose decision, verdicts or reasons
   differ is refused even though its signature holds.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from pydantic import ValidationError

from qualify.decision import waivers
from qualify.decision.derive import Basis, comparable, derive
from qualify.decision.house import HousePolicy, PolicyRules, effective
from qualify.decision.reading import (
    ENVELOPE_RE,
    Listing,
    candidate_in_run,
    check_manifests,
    run_info,
)
from qualify.decision.record import DecisionRecord, WaiverCheck
from qualify.decision.settings import Policy
from qualify.decision.signing import STATEMENT_TYPE, keyid, open_envelope, read_envelope
from qualify.decision.statement import PREDICATE_TYPE, attempt_rel
from qualify.errors import BadInput, Refused
from qualify.evidence.store import MANIFEST, RunDir, sha256_file


@dataclass
class VerifyReport:
    """What verification found; `ok` only when the signature holds and nothing changed."""

    envelope: Path
    run: Path | None = None
    statement: dict[str, Any] | None = None
    signer: str | None = None
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    subjects: int = 0
    record: DecisionRecord | None = None

    @property
    def ok(self) -> bool:
        return self.statement is not None and not self.problems

    @property
    def predicate(self) -> dict[str, Any]:
        p = (self.statement or {}).get("predicate")
        return p if isinstance(p, dict) else {}

    def subjects_with(self, role: str) -> list[dict[str, Any]]:
        subs = (self.statement or {}).get("subject") or []
        return [s for s in subs if (s.get("annotations") or {}).get("role") == role]


def _parse(payload: bytes) -> dict[str, Any]:
    try:
        stmt = json.loads(payload)
    except ValueError as exc:
        raise Refused(f"the signed payload is not JSON ({exc})") from None
    if not isinstance(stmt, dict) or stmt.get("_type") != STATEMENT_TYPE:
        raise Refused(f"the signed payload is not an in-toto Statement v1 ({STATEMENT_TYPE})")
    if stmt.get("predicateType") != PREDICATE_TYPE or not isinstance(stmt.get("subject"), list):
        raise Refused(f"the statement is not a qualify decision ({PREDICATE_TYPE})")
    return stmt


def _inside(run: Path, name: str) -> Path | None:
    """The subject's file, or None when its name leaves the run (absolute, or with `..`)."""
    p = Path(name)
    if p.is_absolute() or ".." in p.parts or not name:
        return None
    return run / p


def _check_subjects(report: VerifyReport, run: Path) -> set[str]:
    names: set[str] = set()
    for s in report.statement["subject"] if report.statement else []:
        name = str(s.get("name"))
        role = (s.get("annotations") or {}).get("role", "evidence")
        path = _inside(run, name)
        names.add(name)
        if path is None:
            report.problems.append(f"{name}: a subject outside the run ({role})")
            continue
        if not path.is_file():
            report.problems.append(f"{name}: missing ({role})")
            continue
        want, got = (s.get("digest") or {}).get("sha256"), sha256_file(path)
        if got != want:
            report.problems.append(
                f"{name}: changed ({role}; signed sha256 {str(want)[:12]}, now {got[:12]})"
            )
    report.subjects = len(names)
    return names


def _check_coverage(report: VerifyReport, run: Path, names: set[str]) -> None:
    """A file added to a signed attempt is a change; a later attempt is only noted."""
    covered = {str(Path(n).parent) for n in names if "/" in n}
    later: set[str] = set()
    for p in RunDir(run).all_files():
        rel = p.relative_to(run).as_posix()
        if rel in names or ENVELOPE_RE.match(rel):
            continue
        parent = str(Path(rel).parent)
        if parent in covered or parent == ".":
            report.problems.append(f"{rel}: added to a signed attempt after the decision")
        else:
            later.add(parent)
    for d in sorted(later):
        report.notes.append(f"{d}: not covered by this decision (written after it, or still open)")


def _rules(record: DecisionRecord, run: RunDir) -> tuple[PolicyRules, list[str]]:
    """The signed effective policy, checked against the signed house rules and candidate copy."""
    problems = []
    rules = PolicyRules.model_validate(record.policy)
    if rules.sha256 != record.policy_sha256:
        problems.append("the signed policy is not the policy its digest names")
    house = HousePolicy.model_validate(record.house.rules)
    if house.rules().sha256 != record.house.policy_sha256:
        problems.append("the signed house rules are not the rules their digest names")
    cand = candidate_in_run(run, record.candidate_copy)
    try:
        derived = effective(house, cand.policy if cand else Policy())
    except BadInput as exc:
        problems.append(f"the candidate copy loosens the house policy: {'; '.join(exc.problems)}")
        return rules, problems
    if derived.sha256 != rules.sha256:
        problems.append(
            "the signed policy is not the house rules tightened by the candidate copy "
            f"(signed {rules.sha256[:16]}, derived {derived.sha256[:16]})"
        )
    return rules, problems


def _waivers(
    record: DecisionRecord, run: RunDir, rules: PolicyRules, signer: str | None
) -> list[WaiverCheck]:
    """Every waiver judged again from its signed copy, with this envelope's signer."""
    bind = waivers.Binding(
        candidate=record.candidate,
        candidate_sha256=record.candidate_sha256,
        policy_sha256=rules.sha256,
        decided_at=record.decided_at,
        rules=rules.waivers,
        run_signer=signer,
    )
    keys = waivers.approvers(waivers.from_record(record.waivers), rules.waivers)
    out = []
    for c in record.waivers:
        if c.evidence is None:
            out.append(c)
            continue
        raw = (run.path / attempt_rel(record.attempt) / c.evidence).read_bytes()
        again = waivers.judge(c.path, raw, keys, bind)
        again.evidence = c.evidence
        out.append(again)
    return out


def _rederive(report: VerifyReport, run: RunDir) -> None:
    pred = {k: v for k, v in report.predicate.items() if k != "record"}
    try:
        record = DecisionRecord.model_validate(pred)
    except ValidationError as exc:
        report.problems.append(
            f"the predicate is not a decision record ({exc.error_count()} errors)"
        )
        return
    report.record = record
    on_disk = run.path / str(report.predicate.get("record"))
    if not on_disk.is_file() or json.loads(on_disk.read_text()) != record.model_dump(mode="json"):
        report.problems.append(f"{report.predicate.get('record')}: not the signed record")
    info = run_info(run)
    copy = record.candidate_copy
    if copy and sha256_file(run.path / copy) != info.get("candidate_sha256"):
        report.problems.append(f"{copy}: not the candidate file run.json names")
    rules, problems = _rules(record, run)
    report.problems += problems
    listing = Listing(
        files={str(s["name"]): s["digest"]["sha256"] for s in report.subjects_with("evidence")},
        unsealed=list(record.unsealed),
    )
    check_manifests(run, listing)
    basis = Basis(
        rules=rules,
        house=record.house,
        attempt=record.attempt,
        decided_at=record.decided_at,
        tool_version=record.tool_version,
        waivers=_waivers(record, run, rules, report.signer),
        candidate_copy=copy,
        record_attempt=record.record_attempt,
    )
    again = derive(run, listing, info, basis)
    want, got = comparable(record), comparable(again)
    for k in want:
        if want[k] != got[k]:
            report.problems.append(
                f"the signed decision does not follow from the signed evidence under the signed "
                f"policy: {k} is {_short(want[k])}, derived {_short(got[k])}"
            )
    for a, b in zip(record.waivers, basis.waivers, strict=True):
        if a.accepted != b.accepted:
            report.problems.append(f"waiver {a.path}: signed accepted={a.accepted}, now: {b.why}")


def _short(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 160 else text[:157] + "..."


def verify(envelope_path: Path, pub: Ed25519PublicKey, run: Path | None = None) -> VerifyReport:
    """Check the signature, re-hash every subject, and derive the decision again."""
    report = VerifyReport(envelope=envelope_path)
    try:
        payload = open_envelope(read_envelope(envelope_path), pub)
        report.statement = _parse(payload)
    except Refused as exc:
        report.problems.append(f"{envelope_path}: {str(exc).removeprefix('qualify: ')}")
        return report
    report.signer = keyid(pub)
    run = run or envelope_path.resolve().parent.parent
    report.run = run
    if not (run / "run.json").is_file():
        report.problems.append(f"{run}: not a run directory (no run.json); pass --run")
        return report
    if run.name != report.predicate.get("run_id"):
        report.notes.append(
            f"the run directory is named {run.name}, the statement names "
            f"{report.predicate.get('run_id')}"
        )
    names = _check_subjects(report, run)
    _check_coverage(report, run, names)
    rec = str(report.predicate.get("record", ""))
    if rec and f"{Path(rec).parent}/{MANIFEST}" not in names:
        report.problems.append(f"{rec}: its attempt's manifest is not signed")
    if not report.problems:  # derive only from files known to be the signed ones
        _rederive(report, RunDir(run))
    return report
