"""`qualify verify`: the signature over the exact payload first, then every subject on disk."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from qualify.decision.reading import ENVELOPE_RE
from qualify.decision.signing import STATEMENT_TYPE, open_envelope, read_envelope
from qualify.decision.statement import PREDICATE_TYPE
from qualify.errors import Refused
from qualify.evidence.store import MANIFEST, RunDir, sha256_file

_OUTSIDE_RUN = ("candidate", "control")


@dataclass
class VerifyReport:
    """What verification found; `ok` only when the signature holds and nothing changed."""

    envelope: Path
    run: Path | None = None
    statement: dict[str, Any] | None = None
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    subjects: int = 0

    @property
    def ok(self) -> bool:
        return self.statement is not None and not self.problems

    @property
    def predicate(self) -> dict[str, Any]:
        p = (self.statement or {}).get("predicate")
        return p if isinstance(p, dict) else {}

    def subject(self, role: str) -> dict[str, Any] | None:
        subs = (self.statement or {}).get("subject") or []
        return next((s for s in subs if (s.get("annotations") or {}).get("role") == role), None)


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


def _where(subject: dict[str, Any], run: Path) -> Path:
    role = (subject.get("annotations") or {}).get("role")
    name = str(subject.get("name"))
    return Path(name) if role in _OUTSIDE_RUN else run / name


def _check_subjects(report: VerifyReport, run: Path) -> set[str]:
    names: set[str] = set()
    for s in report.statement["subject"] if report.statement else []:
        path = _where(s, run)
        names.add(str(s.get("name")))
        want = (s.get("digest") or {}).get("sha256")
        role = (s.get("annotations") or {}).get("role", "evidence")
        if not path.is_file():
            report.problems.append(f"{s.get('name')}: missing ({role})")
            continue
        got = sha256_file(path)
        if got != want:
            report.problems.append(
                f"{s.get('name')}: changed ({role}; signed sha256 {str(want)[:12]}, now {got[:12]})"
            )
    report.subjects = len(names)
    return names


def _check_coverage(report: VerifyReport, run: Path, names: set[str]) -> None:
    """A file added to a signed attempt is a change; a later attempt is only noted."""
    covered = {str(Path(n).parent) for n in names if "/" in n and not Path(n).is_absolute()}
    later: set[str] = set()
    for p in RunDir(run).all_files():
        rel = p.relative_to(run).as_posix()
        if rel in names or ENVELOPE_RE.match(rel):
            continue
        parent = str(Path(rel).parent)
        if parent in covered:
            report.problems.append(f"{rel}: added to a signed attempt after the decision")
        else:
            later.add(parent if parent != "." else rel)
    for d in sorted(later):
        report.notes.append(f"{d}: not covered by this decision (written after it, or still open)")


def verify(envelope_path: Path, pub: Ed25519PublicKey, run: Path | None = None) -> VerifyReport:
    """Check the signature over the exact payload bytes, then re-hash every subject."""
    report = VerifyReport(envelope=envelope_path)
    try:
        payload = open_envelope(read_envelope(envelope_path), pub)
        report.statement = _parse(payload)
    except Refused as exc:
        report.problems.append(f"{envelope_path}: {str(exc).removeprefix('qualify: ')}")
        return report
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
    return report
