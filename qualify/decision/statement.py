"""The in-toto statement of a decision, and the DSSE envelope that signs it.

Every subject is a path inside the run, so an envelope verifies the same wherever the run is
copied. `statement.json` in the decision attempt names every evidence file (role `evidence`),
the record, the document and the copies of the waivers. The signed payload is that statement
with more subjects: `statement.json` itself and the attempt's manifest, and every file of the
invocation attempt that made the decision (`run/attempt-NNN`: the in-run copies of the candidate
and control, the invocation, the outcome, the log), which is sealed after the decision is
written and before it is signed. No byte of the run but the envelopes is left unsigned.

The predicate is the decision record itself (`decision.json`), plus the record's path.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from qualify.errors import BadInput
from qualify.evidence.signing import (
    PAYLOAD_TYPE,
    Subject,
    envelope_bytes,
    seal_envelope,
    statement,
)
from qualify.evidence.store import MANIFEST, RunDir, dumps, sha256_file
from qualify.present.reading import RunView
from qualify.present.record import DecisionRecord

PREDICATE_TYPE = "https://qualify.dev/decision/v2"
STATEMENT = "statement.json"
_COPY_ROLES = {"candidate.toml": "candidate", "control.toml": "control"}
_ROLES = {"decision.json": "decision", "decision.md": "document"}


def attempt_rel(n: int) -> str:
    return f"decision/attempt-{n:03d}"


def envelope_path(run: RunDir, n: int) -> Path:
    return run.path / f"{attempt_rel(n)}.dsse.json"


def _subject(name: str, digest: str, role: str) -> Subject:
    return {"name": name, "digest": {"sha256": digest}, "annotations": {"role": role}}


def build(view: RunView, record: DecisionRecord, here: Path) -> bytes:
    """The statement of the decision attempt `here` whose record, document and waivers are
    written: every file of the listing the decision read (`view`), then the attempt's own."""
    rel = here.relative_to(view.run.path).as_posix()
    subjects = [_subject(n, d, "evidence") for n, d in sorted(view.listing.files.items())]
    for p in sorted(here.iterdir()):
        if p.is_file() and p.name not in (STATEMENT, MANIFEST):
            role = _ROLES.get(p.name, "waiver" if p.name.startswith("waiver-") else "decision-file")
            subjects.append(_subject(f"{rel}/{p.name}", sha256_file(p), role))
    predicate = {"record": f"{rel}/decision.json"} | record.model_dump(mode="json")
    return dumps(statement(subjects, PREDICATE_TYPE, predicate))


def payload(run: RunDir, n: int) -> bytes:
    """What is signed for sealed decision attempt `n`."""
    rel = attempt_rel(n)
    d = run.path / rel
    if not (d / MANIFEST).is_file() or not (d / STATEMENT).is_file():
        raise BadInput(f"{d} is not a sealed decision", ["expected statement.json and manifest"])
    body = json.loads((d / STATEMENT).read_bytes())
    for name, role in ((STATEMENT, "statement"), (MANIFEST, "manifest")):
        body["subject"].append(_subject(f"{rel}/{name}", sha256_file(d / name), role))
    record = body["predicate"].get("record_attempt")  # the sealed invocation attempt, if any
    if record and (run.path / record / MANIFEST).is_file():
        for p in sorted(x for x in (run.path / record).rglob("*") if x.is_file()):
            role = _COPY_ROLES.get(p.name, "record")
            body["subject"].append(
                _subject(p.relative_to(run.path).as_posix(), sha256_file(p), role)
            )
    return dumps(body)


def sign_attempt(run: RunDir, n: int, key: Ed25519PrivateKey) -> Path:
    """Write the envelope of sealed decision attempt `n` once, beside it."""
    env = seal_envelope(payload(run, n), key, PAYLOAD_TYPE)
    out = envelope_path(run, n)
    try:
        fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o444)
    except FileExistsError:
        raise BadInput(f"{out} already exists", ["a decision is signed once"]) from None
    with os.fdopen(fd, "wb") as fh:
        fh.write(envelope_bytes(env))
        fh.flush()
        os.fsync(fh.fileno())
    return out
