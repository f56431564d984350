"""Conclude a run: the house and effective policy, waivers, the one record, tickets, signature.

`setup(house_root)` reads the house at HEAD (or the built-in defaults when there is no house);
`Setup.rules(candidate)` is the effective policy, exit 2 on a loosening. `qualify run` calls
`conclude` while its own invocation attempt is still open (`record_attempt`), seals that attempt,
then `sign_decision`, so the signature covers the invocation too.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from qualify import tickets
from qualify._version import __version__
from qualify.candidate import LoadedCandidate
from qualify.candidate_settings import Policy
from qualify.decision import document, statement, waivers
from qualify.decision.derive import Basis, derive
from qualify.errors import BadInput, QualifyError
from qualify.evidence.listing import evidence_listing
from qualify.evidence.signing import keyid, load_private, open_envelope, read_envelope
from qualify.evidence.store import RunDir, dumps, utc_now
from qualify.present import plots
from qualify.present.reading import DECISION, RunView, read_run
from qualify.present.record import DecisionRecord, HouseRef
from qualify.trust import repository
from qualify.trust.house import HousePolicy, PolicyRules, effective


@dataclass
class Setup:
    """What a decision is made under: the house at one commit (None: built-in defaults)."""

    snapshot: repository.Snapshot | None
    policy: HousePolicy

    @property
    def ref(self) -> HouseRef:
        rules = self.policy.rules()
        snap = self.snapshot
        return HouseRef(
            root=str(snap.root) if snap else None,
            commit=snap.commit if snap else None,
            policy_sha256=rules.sha256,
            rules=rules.model_dump(mode="json"),
            accept=list(self.policy.accept),
        )

    def rules(self, mine: Policy | None, where: str) -> PolicyRules:
        return effective(self.policy, mine or Policy(), where)

    def approvers(self, rules: PolicyRules) -> list[waivers.Approver]:
        return waivers.pinned(self.snapshot, rules.waivers) if self.snapshot else []


def setup(house_root: Path | None) -> Setup:
    if house_root is None:
        return Setup(None, HousePolicy())
    snap = repository.snapshot(house_root)
    return Setup(snap, snap.policy)


def signer(
    key: str | Path | None, loaded: LoadedCandidate | None, evidence_root: Path
) -> Ed25519PrivateKey | None:
    """The decision's private key (`--key`, else the candidate's `signing.key`, relative to the
    candidate file), checked before anything is written; never in the evidence."""
    mine = loaded.candidate.signing.key if loaded else None
    if not key and not mine:
        return None
    base = loaded.directory if loaded else Path.cwd()
    path = Path(key).expanduser() if key else base / Path(str(mine)).expanduser()
    if evidence_root.resolve() in path.resolve().parents:
        raise BadInput(
            f"{path} is inside the evidence root",
            ["key: expected a private key kept outside the evidence (it must never enter it)"],
        )
    return load_private(path)


def copy_path(run: RunDir, record_attempt: str | None) -> str | None:
    """`run/attempt-NNN/candidate.toml` of the invocation that made the decision (else the
    latest invocation's)."""
    dirs = [run.path / record_attempt] if record_attempt else []
    for d in dirs + list(reversed(run.attempt_dirs("run"))):
        if (d / "candidate.toml").is_file():
            return (d / "candidate.toml").relative_to(run.path).as_posix()
    return None


def prepare(
    view: RunView,
    s: Setup,
    attempt: int,
    record_attempt: str | None = None,
    signer: str | None = None,
) -> tuple[Basis, list[bytes]]:
    """A decision's basis: the effective policy from the in-run candidate copy, and every waiver
    it lists, judged; with the waivers' bytes (copied into the decision attempt)."""
    run, cand, copy = view.run, view.candidate, view.copy
    rules = s.rules(cand.policy if cand else None, f"{run.path}/{copy}" if copy else "the run")
    decided_at = utc_now()
    bind = waivers.Binding(
        candidate=str(view.info.get("candidate") or run.candidate_name),
        candidate_sha256=view.info.get("candidate_sha256"),
        policy_sha256=rules.sha256,
        decided_at=decided_at,
        rules=rules.waivers,
        run_signer=signer,
    )
    found = s.snapshot.waivers(bind.candidate) if s.snapshot else []
    checks = waivers.judged(found, s.snapshot, bind)
    basis = Basis(rules, s.ref, attempt, decided_at, __version__, checks, record_attempt)
    return basis, [raw for _, raw in found]


def conclude(
    run: RunDir,
    s: Setup,
    priv: Ed25519PrivateKey | None = None,
    record_attempt: str | None = None,
) -> DecisionRecord:
    """Decide, write the decision attempt and seal it; sign it now unless the invocation
    attempt (`record_attempt`) is still open, in which case the caller signs after sealing it.
    The run is read once (`read_run`): the record, plots, document and statement all read it."""
    attempt = run.new_attempt(DECISION)
    try:
        skip = {attempt.path.relative_to(run.path).as_posix(), record_attempt or ""}
        listing = evidence_listing(run, skip=skip)
        view = read_run(run, listing, copy_path(run, record_attempt))
        signer = keyid(priv.public_key()) if priv else None
        basis, raws = prepare(view, s, attempt.number, record_attempt, signer)
        for i, (c, raw) in enumerate(zip(basis.waivers, raws, strict=True), 1):
            c.evidence = attempt.write_bytes(f"waiver-{i:02d}.json", raw)[0]  # now evidence
        record = derive(view, basis)
        where = view.candidate.policy.tickets_dir if view.candidate else None
        record.tickets = tickets.for_decision(record, where)
        attempt.write_bytes("decision.json", dumps(record.model_dump(mode="json")))
        for name, png in plots.drawn(view.count(record)):
            attempt.write_bytes(name, png)
        attempt.write_bytes("decision.md", document.render(view, record).encode())
        attempt.write_bytes(statement.STATEMENT, statement.build(view, record, attempt.path))
    except Exception:
        attempt.write_text("traceback.txt", traceback.format_exc())
        raise
    finally:
        attempt.seal()
    if priv is not None and record_attempt is None:
        statement.sign_attempt(run, attempt.number, priv)
    return record


def latest(run: RunDir, attempt: int | None = None) -> DecisionRecord | None:
    """The latest decision record (or decision attempt `attempt`), None when there is none."""
    dirs = run.attempt_dirs(DECISION)
    if attempt is not None:
        dirs = [d for d in dirs if d.name == f"attempt-{attempt:03d}"]
    for d in reversed(dirs):
        f = d / "decision.json"
        if f.is_file():
            return DecisionRecord.model_validate_json(f.read_text())
    return None


def covers_run(run: RunDir, record: DecisionRecord) -> bool:
    """Whether the evidence on disk is still exactly what this decision was made from."""
    skip = {statement.attempt_rel(record.attempt), record.record_attempt or ""}
    now = evidence_listing(run, skip)
    later = [d for d in run.attempt_dirs(DECISION) if d.name > f"attempt-{record.attempt:03d}"]
    return now.root == record.evidence_root and not now.unsealed and not later


def sign_decision(run: RunDir, record: DecisionRecord, priv: Ed25519PrivateKey) -> Path:
    """Sign a written decision; refused when this key approved one of its waivers."""
    kid = keyid(priv.public_key())
    if any(w.accepted and w.signer_keyid == kid for w in record.waivers):
        raise BadInput(
            "this key approved a waiver the decision relies on",
            ["key: a run cannot waive itself; sign the decision with another key"],
        )
    return statement.sign_attempt(run, record.attempt, priv)


def sign(run: RunDir, key: Path, s: Setup) -> tuple[Path, DecisionRecord]:
    """Sign the latest decision if it still covers the run and is unsigned; else decide anew.
    A decision is signed once: when it is already signed by another key than `key`, nothing is
    signed and that is bad input (exit 2), naming both keys."""
    priv: Ed25519PrivateKey = load_private(key)
    record = latest(run)
    if record is None or not covers_run(run, record):
        record = conclude(run, s, priv)
        return statement.envelope_path(run, record.attempt), record
    env = statement.envelope_path(run, record.attempt)
    if not env.exists():
        return sign_decision(run, record, priv), record
    mine = priv.public_key()
    try:
        open_envelope(read_envelope(env), mine)
    except QualifyError:  # `key` did not sign it: signing it again is not possible
        sigs = read_envelope(env).get("signatures") or [{}]
        other = str(sigs[0].get("keyid") if isinstance(sigs[0], dict) else "?")
        raise BadInput(
            f"{env} is already signed, by key {other[:16]}",
            [
                f"--key {key}: key {keyid(mine)[:16]} is not the key that signed it; a decision "
                "is signed once, and nothing was signed now"
            ],
        ) from None
    return env, record
