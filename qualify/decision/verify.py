"""`qualify verify`: the signature, the run exactly as sealed, then the verdict derived again.

1. the envelope: canonical (exactly the form `qualify` writes, one signature), and the
   signature over the exact payload bytes, before anything is parsed;
2. the run is exactly what was sealed: every entry under the run directory is a plain file or
   directory (no symbolic link anywhere), every file a signed subject (or a decision envelope;
   a whole later attempt is noted), every subject re-hashed without following links;
3. every path the decision names and verify reads (the record, run.json, the candidate copy,
   the waiver copies) is a signed subject inside the run;
4. the stages judged again offline from the raw exchanges their attempts kept, with the
   project's gate files and check code and the signed thresholds: identity
   (`qualify.identity.rebuild`) and every registered stage with a `rebuild` module
   (`qualify.trust.rejudge`); a `result.json` whose gates, or whose judged figures, differ
   from what its exchanges give is refused, and what a stage does not keep raw is named in the
   notes as taken from the record;
5. the decision derived again (`derive`) from the signed evidence under the signed policy, the
   signed house rules tightened by the signed candidate copy, and the signed waiver copies
   judged again with the waiver approver keys a house pins (`approvers`; never a key the record
   carries) and this envelope's signer: a statement whose decision, verdicts or reasons differ
   is refused even though its signature holds.

Every failure is a problem in the report, never an exception: the input is hostile.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from pydantic import ValidationError

from qualify.candidate_settings import Policy
from qualify.decision import waivers
from qualify.decision.derive import Basis, comparable, derive
from qualify.decision.statement import PREDICATE_TYPE, attempt_rel
from qualify.errors import BadInput, QualifyError, Refused
from qualify.evidence.listing import ENVELOPE_RE, Listing, check_manifests
from qualify.evidence.signing import (
    STATEMENT_TYPE,
    canonical,
    envelope_bytes,
    keyid,
    open_envelope,
    read_envelope,
    sha256_bytes,
)
from qualify.evidence.store import MANIFEST, RunDir
from qualify.present.reading import RunView, read_run
from qualify.present.record import DecisionRecord, WaiverCheck
from qualify.present.sections import as_list
from qualify.trust.house import HousePolicy, PolicyRules, effective


class Subject(NamedTuple):
    """A signed subject: a path inside the run, its sha256 and its role."""

    name: str
    sha256: str
    role: str


@dataclass
class VerifyReport:
    """What verification found; `ok` only when the signature holds and nothing changed."""

    envelope: Path
    run: Path | None = None
    statement: dict[str, object] | None = None  # raw signed JSON
    signer: str | None = None
    payload_sha256: str | None = None
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    subjects: int = 0
    signed: list[Subject] = field(default_factory=list)  # well-formed ones (`verify` names others)
    record: DecisionRecord | None = None
    waivers: list[WaiverCheck] = field(default_factory=list)
    view: RunView | None = None  # the run as the signed decision counted it, read once

    @property
    def ok(self) -> bool:
        return self.statement is not None and not self.problems

    @property
    def predicate(self) -> dict[str, object]:  # raw signed JSON
        p = (self.statement or {}).get("predicate")
        return p if isinstance(p, dict) else {}


def _canonical(env: dict[str, object], raw: bytes, signer: str) -> str | None:  # raw signed JSON
    """Why the envelope is not exactly what `qualify` writes (one signature, its keyid, no
    other field, the same bytes), None when it is; its unsigned parts cannot vary."""
    if set(env) != {"payload", "payloadType", "signatures"}:
        return f"it holds fields {sorted(env)}, expected payload, payloadType, signatures"
    sigs = env.get("signatures")
    if not isinstance(sigs, list) or len(sigs) != 1 or not isinstance(sigs[0], dict):
        return "it holds other than exactly one signature"
    if set(sigs[0]) != {"keyid", "sig"}:
        return f"its signature holds fields {sorted(sigs[0])}, expected keyid, sig"
    if sigs[0].get("keyid") != signer:
        return f"its keyid is not the signer's ({signer[:16]})"
    if raw != envelope_bytes(env):
        return "its bytes are not the canonical form (reformatted)"
    return None


def name_in_run(name: object) -> str | None:
    """Why a subject name is not a plain relative path inside the run, None when it is."""
    if not isinstance(name, str) or not name:
        return "not a path"
    p = Path(name)
    if p.is_absolute() or ".." in p.parts or p.as_posix() != name or "\\" in name:
        return "a path that leaves the run or is not in its plain form"
    return None


def _check_subjects(report: VerifyReport, run: Path) -> set[str]:
    raw = as_list((report.statement or {}).get("subject"))
    for s in raw:  # the well-formed subjects first
        digest = s.get("digest") if isinstance(s, dict) else None
        ann = s.get("annotations") if isinstance(s, dict) else None
        sha = digest.get("sha256") if isinstance(digest, dict) else None
        role = ann.get("role", "evidence") if isinstance(ann, dict) else "evidence"
        if isinstance(s, dict) and isinstance(s.get("name"), str) and isinstance(sha, str):
            report.signed.append(Subject(s["name"], sha, str(role)))
    names: set[str] = set()
    for s in raw:
        name = s.get("name") if isinstance(s, dict) else None
        subs = [x for x in report.signed if x.name == name]
        if not subs:
            report.problems.append(f"subject {str(s)[:80]}: not a name with a sha256 digest")
            continue
        role = subs[0].role
        why = name_in_run(name)
        if why is not None:
            report.problems.append(f"{name}: a subject outside the run ({role}: {why})")
            continue
        assert isinstance(name, str)
        if name in names:
            if len({x.sha256 for x in subs}) > 1:
                report.problems.append(f"{name}: signed twice with different digests")
            continue
        names.add(name)
        try:  # a regular file, opened without following a link
            fd = os.open(run / name, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
            with os.fdopen(fd, "rb") as fh:
                plain = stat.S_ISREG(os.fstat(fh.fileno()).st_mode)
                got = hashlib.file_digest(fh, "sha256").hexdigest() if plain else None
        except OSError:
            got = None
        if got is None:
            report.problems.append(f"{name}: missing, or not a plain file ({role})")
            continue
        want = subs[0].sha256
        if got != want:
            report.problems.append(
                f"{name}: changed ({role}; signed sha256 {str(want)[:12]}, now {got[:12]})"
            )
    report.subjects = len(names)
    return names


_ATTEMPT_RE = re.compile(r"^([^/]+)/attempt-(\d+)(?:/|$)")


def _check_exact(report: VerifyReport, run: Path, names: set[str]) -> None:
    """Nothing in the run but what the decision sealed (and decision envelopes): a file, a
    directory or a link added anywhere is named; a whole attempt added after the decision (a
    stage run again, a later decision) is noted, not refused; the record's manifest signed."""
    found: dict[str, str] = {}  # every entry under the run, links not followed: {rel: kind}
    stack = [run]
    while stack:
        d = stack.pop()
        try:
            entries = sorted(os.scandir(d), key=lambda e: e.name)
        except OSError as exc:
            report.problems.append(f"{d}: cannot be listed ({exc.strerror or exc})")
            continue
        for e in entries:
            rel = Path(e.path).relative_to(run).as_posix()
            mode = e.stat(follow_symlinks=False).st_mode
            if stat.S_ISLNK(mode):
                report.problems.append(
                    f"{rel}: a symbolic link (a sealed run holds plain files only)"
                )
            elif stat.S_ISDIR(mode):
                found[rel] = "dir"
                stack.append(Path(e.path))
            elif stat.S_ISREG(mode):
                found[rel] = "file"
            else:
                report.problems.append(f"{rel}: not a plain file or directory")
    parents = {p.as_posix() for n in names for p in Path(n).parents if p.as_posix() != "."}
    later: dict[str, str] = {}  # each entry in an attempt after every one sealed of its stage
    for rel in found:
        m = _ATTEMPT_RE.match(rel)
        if m is None or m.group(0).rstrip("/") in parents:
            continue
        sealed = [int(x[2]) for p in parents if (x := _ATTEMPT_RE.match(p)) and x[1] == m[1]]
        if int(m.group(2)) > max(sealed, default=0):
            later[rel] = m.group(0).rstrip("/")  # `stage/attempt-NNN`
    stages = {a.split("/", 1)[0] for a in later.values()}
    for rel, kind in sorted(found.items()):
        if kind == "file" and (rel in names or ENVELOPE_RE.match(rel)):
            continue
        if kind == "dir" and (rel in parents or rel == "decision" or rel in stages):
            continue
        if rel in later:
            continue
        what = "a file" if kind == "file" else "a directory"
        report.problems.append(f"{rel}: {what} this decision did not seal (added after it)")
    report.notes += [
        f"{a}: an attempt added after this decision (not sealed by it)"
        for a in sorted(set(later.values()))
    ]
    rec = str(report.predicate.get("record", ""))
    if rec and f"{Path(rec).parent}/{MANIFEST}" not in names:
        report.problems.append(f"{rec}: its attempt's manifest is not signed")


def _signed_path(report: VerifyReport, rel: str | None, what: str) -> str | None:
    """`rel` when it names a signed subject inside the run; else a problem and None."""
    if rel is None:
        return None
    if name_in_run(rel) is not None or not any(s.name == rel for s in report.signed):
        report.problems.append(f"{what} {rel!r}: not a signed file of the run")
        return None
    return rel


def _rules(record: DecisionRecord, view: RunView) -> tuple[PolicyRules, list[str]]:
    """The signed effective policy, checked against the signed house rules and candidate copy.

    Each digest is checked over the signed table itself (canonical JSON), so a later version of
    the rules' model, with fields the decision predates, still reads an earlier decision; the
    policy is then compared, as this version reads them, with the house rules tightened by the
    candidate copy."""
    problems = []
    rules = PolicyRules.model_validate(record.policy)
    if sha256_bytes(canonical(record.policy)) != record.policy_sha256:
        problems.append("the signed policy is not the policy its digest names")
    house = HousePolicy.model_validate(record.house.rules)
    if sha256_bytes(canonical(record.house.rules)) != record.house.policy_sha256:
        problems.append("the signed house rules are not the rules their digest names")
    cand = view.candidate
    if view.copy is not None and cand is None:
        problems.append(f"{view.copy}: the signed candidate copy is not a valid candidate")
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
    report: VerifyReport,
    record: DecisionRecord,
    run: RunDir,
    rules: PolicyRules,
    keys: list[waivers.Approver] | None,
) -> list[WaiverCheck]:
    """Every waiver judged again from its signed copy, with the house's pinned approver keys and
    this envelope's signer; without a house, a waiver the decision accepted is a problem."""
    bind = waivers.Binding(
        record.candidate, record.candidate_sha256, rules.sha256, record.decided_at, rules.waivers
    )
    bind.run_signer = report.signer
    out = []
    for c in record.waivers:
        where = f"{attempt_rel(record.attempt)}/{c.evidence}"
        rel = None if c.evidence is None else _signed_path(report, where, "waiver copy")
        if c.evidence is None and c.accepted:
            report.problems.append(f"waiver {c.path}: accepted, but no signed copy in the run")
        elif rel is not None and keys is None and c.accepted:
            report.problems.append(
                f"waiver {c.path}: the decision counts it, and its approver's key is checked "
                "only against the keys a house pins (pass --house)"
            )
        if rel is None or keys is None:
            out.append(c)
            continue
        again = waivers.judge(c.path, (run.path / rel).read_bytes(), keys, bind)
        again.evidence = c.evidence
        out.append(again)
    return out


def _read(report: VerifyReport, run: RunDir) -> None:
    """The signed record and the run as it counted it (`report.record`, `report.view`), read
    from the files just checked against the signed subjects."""
    pred = {k: v for k, v in report.predicate.items() if k != "record"}
    try:
        record = DecisionRecord.model_validate(pred)
    except ValidationError as exc:
        report.problems.append(
            f"the predicate is not a decision record ({exc.error_count()} errors)"
        )
        return
    report.record = record
    rec = _signed_path(report, str(report.predicate.get("record")), "the record")
    if rec is not None:
        try:
            same = json.loads((run.path / rec).read_text()) == record.model_dump(mode="json")
        except ValueError:
            same = False
        if not same:
            report.problems.append(f"{rec}: not the signed record")
    _signed_path(report, "run.json", "the run's")
    copy = _signed_path(report, record.candidate_copy, "the candidate copy")
    signed = {s.name: s.sha256 for s in report.signed}
    listing = Listing(
        files={s.name: s.sha256 for s in report.signed if s.role == "evidence"},
        unsealed=list(record.unsealed),
    )
    check_manifests(run, listing)
    view = read_run(run, listing, copy, signed)
    report.problems += view.problems
    if copy and signed[copy] != view.info.get("candidate_sha256"):
        report.problems.append(f"{copy}: not the candidate file run.json names")
    report.view = view.count(record)


def _rederive(report: VerifyReport, keys: list[waivers.Approver] | None) -> None:
    """The signed decision derived again from the signed evidence: every stage judged again
    from what it kept, under the signed policy, its waivers checked."""
    record, view = report.record, report.view
    assert record is not None and view is not None  # `_read` read both
    signed = {s.name: s.sha256 for s in report.signed}
    rules, problems = _rules(record, view)
    report.problems += problems
    from qualify.trust.rejudge import rejudge_run

    more, said = rejudge_run(view, rules.thresholds, signed, rules.check_codes)
    report.problems += more
    report.notes += said
    checks = _waivers(report, record, view.run, rules, keys)
    report.waivers = checks
    r = record
    basis = Basis(rules, r.house, r.attempt, r.decided_at, r.tool_version, checks, r.record_attempt)
    again = derive(view, basis)
    if not problems:  # the signed policy is the derived one, as this version reads both
        again.policy_sha256 = record.policy_sha256
    want, got = comparable(record), comparable(again)
    for k in want:
        if want[k] != got[k]:
            report.problems.append(
                f"the signed decision does not follow from the signed evidence under the signed "
                f"policy: {k} is {_short(want[k])}, derived {_short(got[k])}"
            )
    for a, b in zip(record.waivers, checks, strict=True):
        if a.accepted != b.accepted:
            report.problems.append(f"waiver {a.path}: signed accepted={a.accepted}, now: {b.why}")


def _short(value: object) -> str:
    text = json.dumps(value)
    return text if len(text) <= 160 else text[:157] + "..."


def read_signed(
    envelope_path: Path, pub: Ed25519PublicKey, run: Path | None = None
) -> VerifyReport:
    """Check the envelope and its signature and that the run is exactly what was sealed; read
    the signed record and the run as it counted it. Nothing is judged again (`verify` does)."""
    report = VerifyReport(envelope=envelope_path)
    try:
        try:
            raw = envelope_path.read_bytes()
            env = read_envelope(envelope_path)
            payload = open_envelope(env, pub)
            try:
                stmt = json.loads(payload)
            except ValueError as exc:
                raise Refused(f"the signed payload is not JSON ({exc})") from None
            if not isinstance(stmt, dict) or stmt.get("_type") != STATEMENT_TYPE:
                raise Refused(
                    f"the signed payload is not an in-toto Statement v1 ({STATEMENT_TYPE})"
                )
            if stmt.get("predicateType") != PREDICATE_TYPE or not isinstance(
                stmt.get("subject"), list
            ):
                raise Refused(f"the statement is not a qualify decision ({PREDICATE_TYPE})")
            if not isinstance(stmt.get("predicate"), dict):
                raise Refused("the statement's predicate is not a table")
            report.statement = stmt
        except (Refused, BadInput, OSError) as exc:
            text = exc.render() if isinstance(exc, BadInput) else str(exc)
            report.problems.append(f"{envelope_path}: {text.removeprefix('qualify: ')}")
            return report
        report.signer = keyid(pub)
        report.payload_sha256 = sha256_bytes(payload)
        odd = _canonical(env, raw, report.signer)
        if odd is not None:
            report.problems.append(f"{envelope_path}: not a canonical decision envelope: {odd}")
        run = run or envelope_path.resolve().parent.parent
        report.run = run
        if not (run / "run.json").is_file():
            report.problems.append(f"{run}: not a run directory (no run.json); pass --run")
            return report
        inside = envelope_path.resolve().is_relative_to(run.resolve())
        rel = envelope_path.resolve().relative_to(run.resolve()).as_posix() if inside else ""
        if not ENVELOPE_RE.match(rel):
            report.notes.append(f"{envelope_path}: the envelope is not kept in {run}/decision")
        if run.name != report.predicate.get("run_id"):
            report.notes.append(
                f"the run directory is named {run.name}, the statement names "
                f"{report.predicate.get('run_id')}"
            )
        _check_exact(report, run, _check_subjects(report, run))
        if not report.problems:  # read only files known to be the signed ones
            _read(report, RunDir(run))
    except _HOSTILE as exc:
        report.problems.append(_unchecked(exc))
    return report


def verify(
    envelope_path: Path,
    pub: Ed25519PublicKey,
    run: Path | None = None,
    approvers: list[waivers.Approver] | None = None,
) -> VerifyReport:
    """`read_signed`, then the decision derived again from the signed evidence. `approvers`:
    the waiver keys a house pins (None: no house, so a waiver the decision counts cannot be
    checked and is a problem)."""
    report = read_signed(envelope_path, pub, run)
    if report.view is not None:  # read from files known to be the signed ones
        try:
            _rederive(report, approvers)
        except _HOSTILE as exc:
            report.problems.append(_unchecked(exc))
    return report


# hostile input reaching a reader not guarded: a refusal, never a traceback
_HOSTILE = (QualifyError, OSError, ValueError, KeyError, TypeError, ValidationError)


def _unchecked(exc: Exception) -> str:
    why = exc.render() if isinstance(exc, BadInput) else str(exc)
    return f"could not be checked: {why.removeprefix('qualify: ')}"
