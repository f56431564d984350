"""The in-toto statement of a decision, and the DSSE envelope that signs it.

`statement.json` in the decision attempt names every evidence file, the decision record, the
rendered markdown and the candidate file. The signed payload is that statement with two more
subjects: `statement.json` itself and the attempt's manifest, so no byte of the run is unsigned.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from qualify.decision.reading import Listing
from qualify.decision.record import DecisionRecord
from qualify.decision.signing import PAYLOAD_TYPE, envelope_bytes, seal_envelope, statement
from qualify.errors import BadInput
from qualify.evidence.store import MANIFEST, RunDir, sha256_file

PREDICATE_TYPE = "https://qualify.dev/decision/v1"
STATEMENT = "statement.json"


def attempt_rel(n: int) -> str:
    return f"decision/attempt-{n:03d}"


def envelope_path(run: RunDir, n: int) -> Path:
    return run.path / f"{attempt_rel(n)}.dsse.json"


def _subject(name: str, digest: str, role: str) -> dict[str, Any]:
    return {"name": name, "digest": {"sha256": digest}, "annotations": {"role": role}}


def _predicate(record: DecisionRecord) -> dict[str, Any]:
    ev = record.evaluation
    return {
        "version": 1,
        "run_id": record.run_id,
        "candidate": record.candidate,
        "decision": record.decision,
        "verdict": ev.verdict.value,
        "reasons": ev.reasons,
        "decided_at": record.decided_at,
        "tool_version": record.tool_version,
        "policy": record.policy,
        "policy_sha256": record.policy_sha256,
        "evidence_root": record.evidence_root,
        "record": f"{attempt_rel(record.attempt)}/decision.json",
        "gates": [
            {
                "key": g.key,
                "verdict": g.verdict.value,
                "status": g.status,
                "required": g.required,
                "critical": g.critical,
                "authoritative": g.authoritative.model_dump(mode="json"),
                "superseded": [s.model_dump(mode="json") for s in g.superseded],
                "waiver": g.waiver,
            }
            for g in ev.gates
        ],
        "stages": [s.model_dump(mode="json") for s in ev.stages],
        "missing": ev.missing,
        "unsealed": record.unsealed,
        "tickets": [t.id for t in record.tickets],
        "waivers": [w.model_dump(mode="json") for w in record.waivers],
    }


def build(run: RunDir, record: DecisionRecord, listing: Listing, info: dict[str, Any]) -> bytes:
    """The statement of a decision attempt whose record and markdown are already written."""
    rel = attempt_rel(record.attempt)
    subjects = [_subject(n, d, "evidence") for n, d in sorted(listing.files.items())]
    for name, role in (("decision.json", "decision"), ("decision.md", "document")):
        subjects.append(_subject(f"{rel}/{name}", sha256_file(run.path / rel / name), role))
    for field, role in (("candidate_path", "candidate"), ("control_path", "control")):
        path = info.get(field)
        if path and Path(path).is_file():
            subjects.append(_subject(str(path), sha256_file(Path(path)), role))
    return _dump(statement(subjects, PREDICATE_TYPE, _predicate(record)))


def _dump(obj: Any) -> bytes:
    return (json.dumps(obj, indent=1) + "\n").encode()


def sign_attempt(run: RunDir, n: int, key: Ed25519PrivateKey) -> Path:
    """Write the envelope of sealed decision attempt `n` once, beside it."""
    rel = attempt_rel(n)
    d = run.path / rel
    if not (d / MANIFEST).is_file() or not (d / STATEMENT).is_file():
        raise BadInput(f"{d} is not a sealed decision", ["expected statement.json and manifest"])
    body = json.loads((d / STATEMENT).read_bytes())
    for name, role in ((STATEMENT, "statement"), (MANIFEST, "manifest")):
        body["subject"].append(_subject(f"{rel}/{name}", sha256_file(d / name), role))
    env = seal_envelope(_dump(body), key, PAYLOAD_TYPE)
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
