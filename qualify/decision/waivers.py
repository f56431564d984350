"""Waivers: a signed, expiring permission for one inconclusive gate of one exact candidate.

A waiver is a DSSE envelope (payload type below), committed in the house repository under
`waivers/<candidate>/` (so listing it never changes the candidate's digest). It binds the gate
key, the candidate file's sha256, the digest of the effective policy it was granted under, and
an expiry. It counts only when signed by a waiver key the house pins (`qualify house pin
waiver`) whose name the house policy lists as an approver, by a key other than the one that
signs the decision, within the house's longest term, and unexpired at the decision's time.
Whether it counts depends on signed data and the house's pinned keys alone: `qualify verify
--house` and `qualify alias set` judge the run's signed copy again with the approver keys the
house pins at HEAD, never with a key the record or the waiver carries. It only ever turns
`inconclusive` into `waived`; a fail or an error stays.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from fnmatch import fnmatchcase
from pathlib import Path
from typing import TYPE_CHECKING

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from qualify.errors import BadInput, QualifyError
from qualify.evidence.signing import (
    envelope_bytes,
    load_private,
    open_envelope,
    seal_envelope,
    sha256_bytes,
)
from qualify.evidence.store import dumps, utc_now
from qualify.present.record import WaiverCheck
from qualify.tickets import TicketStore
from qualify.trust.house import WaiverRules

if TYPE_CHECKING:
    from qualify.trust.repository import Snapshot

WAIVER_TYPE = "application/vnd.qualify.waiver+json"
_TIME = "%Y-%m-%dT%H:%M:%SZ"


def _time(text: str) -> datetime:
    return datetime.strptime(text, _TIME).replace(tzinfo=UTC)


def grant(
    store: TicketStore,
    house: Path,
    ticket_id: str,
    reason: str,
    key: Path,
    bound: dict[str, str],
    days: int,
) -> tuple[Path, str]:
    """Sign a waiver of the gate of an open ticket, bound to `candidate_sha256` and
    `policy_sha256` (from the decision that opened it), and commit it to the house under
    `waivers/<candidate>/<ticket>.json`."""
    from qualify.trust.repository import add_waiver

    t = store.get(ticket_id)
    if t.status != "open":
        raise BadInput(f"ticket {ticket_id} is {t.status}", ["id: expected an open ticket"])
    now = utc_now()
    payload = {
        "version": 2,
        "ticket": t.id,
        "gate": t.gate,
        "candidate": t.candidate,
        "candidate_sha256": bound["candidate_sha256"],
        "policy_sha256": bound["policy_sha256"],
        "reason": reason,
        "granted_at": now,
        "expires": (_time(now) + timedelta(days=days)).strftime(_TIME),
    }
    env = seal_envelope(dumps(payload), load_private(key), WAIVER_TYPE)
    return add_waiver(house, t.candidate, ticket_id, envelope_bytes(env))


@dataclass
class Approver:
    name: str
    keyid: str
    pub: Ed25519PublicKey


@dataclass
class Binding:
    """What a waiver must match to count in this decision."""

    candidate: str
    candidate_sha256: str | None
    policy_sha256: str
    decided_at: str
    rules: WaiverRules
    run_signer: str | None = None  # keyid of the key that signs the decision, when known


def judge(label: str, raw: bytes, approvers: list[Approver], b: Binding) -> WaiverCheck:
    """Whether one waiver counts in this decision, and why not when it does not."""
    base = {"path": label, "sha256": sha256_bytes(raw)}
    try:  # the payload, and the approver whose key verifies it
        if not approvers:
            raise ValueError("the house pins no waiver key that its policy lists as an approver")
        try:
            env = json.loads(raw)
        except ValueError:
            raise ValueError("it is not a JSON envelope") from None
        for who in approvers:
            try:
                data = json.loads(open_envelope(env, who.pub, WAIVER_TYPE))
                break
            except QualifyError:
                continue
        else:
            raise ValueError("no pinned waiver approver key verifies it")
        if not isinstance(data, dict):
            raise ValueError("its payload is not a table")
    except ValueError as exc:
        return WaiverCheck(**base, accepted=False, why=f"signature not accepted: {exc}")
    pem = who.pub.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    seen = {k: str(data.get(k)) for k in ("gate", "ticket", "expires")}
    seen |= {"signer": who.name, "signer_keyid": who.keyid, "signer_pem": pem.decode()}
    bound = [("candidate", b.candidate), ("candidate_sha256", b.candidate_sha256)]
    wrong = [(f, w) for f, w in [*bound, ("policy_sha256", b.policy_sha256)] if data.get(f) != w]
    why: str | None = None
    times: list[datetime] | None = None
    with contextlib.suppress(ValueError):
        times = [_time(str(data.get(k))) for k in ("granted_at", "expires")]
    if b.run_signer is not None and who.keyid == b.run_signer:
        why = "signed by the key that signs the decision (a run cannot waive itself)"
    elif wrong:
        field, want = wrong[0]
        why = f"it binds {field} {str(data.get(field))[:16]}, this run has {str(want)[:16]}"
    elif times is None:
        why = "its grant or expiry is not a UTC time"
    elif times[1] <= _time(b.decided_at):
        why = f"it expired at {data.get('expires')}"
    elif times[1] - times[0] > timedelta(days=b.rules.max_days):
        why = f"it runs longer than the house's {b.rules.max_days} days"
    return WaiverCheck(**base, **seen, accepted=why is None, why=why or "verified")


def judged(found: list[tuple[str, bytes]], snap: Snapshot | None, b: Binding) -> list[WaiverCheck]:
    """The waivers `found`, judged with the approver keys the house at `snap` pins (none
    without a house)."""
    keys = pinned(snap, b.rules) if snap else []
    return [judge(rel, raw, keys, b) for rel, raw in found]


def pinned(snap: Snapshot, rules: WaiverRules) -> list[Approver]:
    """The waiver keys the house pins at its commit whose names `rules` lists as approvers: the
    only keys a waiver is ever checked with (never a key a record or waiver carries)."""
    found = [Approver(k.name, k.keyid, k.pub) for k in snap.keys.get("waiver", {}).values()]
    return [a for a in found if any(fnmatchcase(a.name, p) for p in rules.approvers)]
