"""Waivers: a signed statement that one inconclusive gate may pass, tied to an open ticket.

A waiver is a DSSE envelope (payload type below) signed by a key the policy lists in
`waiver_keys`. It only ever turns `inconclusive` into `waived`; a fail or an error stays.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qualify.decision.record import WaiverCheck
from qualify.decision.settings import Policy
from qualify.decision.signing import (
    envelope_bytes,
    load_private,
    load_public,
    open_envelope,
    read_envelope,
    seal_envelope,
    sha256_bytes,
)
from qualify.errors import QualifyError
from qualify.evidence.store import utc_now
from qualify.tickets import TicketStore

WAIVER_TYPE = "application/vnd.qualify.waiver+json"


def make_waiver(store: TicketStore, ticket_id: str, reason: str, key: Path, out: Path) -> Path:
    """Sign a waiver of the gate of an open ticket; written once at `out`."""
    t = store.get(ticket_id)
    if t.status != "open":
        from qualify.errors import BadInput

        raise BadInput(f"ticket {ticket_id} is {t.status}", ["id: expected an open ticket"])
    payload = {
        "version": 1,
        "ticket": t.id,
        "gate": t.gate,
        "candidate": t.candidate,
        "reason": reason,
        "granted_at": utc_now(),
    }
    body = (json.dumps(payload, indent=1) + "\n").encode()
    env = seal_envelope(body, load_private(key), WAIVER_TYPE)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("xb") as fh:
        fh.write(envelope_bytes(env))
    return out


@dataclass
class Checked:
    check: WaiverCheck
    raw: bytes | None


def _open(path: Path, keys: list[Path]) -> tuple[bytes, dict[str, Any]]:
    """The waiver's payload, verified by one of the keys; raises with the reason otherwise."""
    if not keys:
        raise ValueError("the policy lists no waiver_keys to verify it with")
    env = read_envelope(path)
    last = "no key verified it"
    for k in keys:
        try:
            payload = open_envelope(env, load_public(k), WAIVER_TYPE)
        except QualifyError as exc:
            last = str(exc).removeprefix("qualify: ")
            continue
        data = json.loads(payload)
        if not isinstance(data, dict):
            raise ValueError("its payload is not a table")
        return payload, data
    raise ValueError(last)


def check_one(path: Path, keys: list[Path], store: TicketStore, candidate: str) -> Checked:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        return Checked(WaiverCheck(path=str(path), accepted=False, why=str(exc)), None)
    digest = sha256_bytes(raw)

    def no(why: str, gate: str | None = None, ticket: str | None = None) -> Checked:
        check = WaiverCheck(
            path=str(path), sha256=digest, gate=gate, ticket=ticket, accepted=False, why=why
        )
        return Checked(check, raw)

    try:
        _, data = _open(path, keys)
    except (ValueError, QualifyError) as exc:
        return no(f"signature not accepted: {str(exc).removeprefix('qualify: ')}")
    gate, ticket = str(data.get("gate")), str(data.get("ticket"))
    if data.get("candidate") != candidate:
        return no(f"it waives candidate {data.get('candidate')!r}, not {candidate!r}", gate, ticket)
    open_t = next((t for t in store.all("open") if t.id == ticket), None)
    if open_t is None:
        return no(f"ticket {ticket} is not open", gate, ticket)
    if open_t.gate != gate:
        return no(f"ticket {ticket} is about {open_t.gate}, not {gate}", gate, ticket)
    ok = WaiverCheck(
        path=str(path), sha256=digest, gate=gate, ticket=ticket, accepted=True, why="verified"
    )
    return Checked(ok, raw)


def check_all(policy: Policy, base: Path, store: TicketStore, candidate: str) -> list[Checked]:
    """Every waiver the policy lists, checked; paths are relative to the candidate file."""
    keys = [_resolve(base, k) for k in policy.waiver_keys]
    return [check_one(_resolve(base, w), keys, store, candidate) for w in policy.waivers]


def _resolve(base: Path, p: str) -> Path:
    q = Path(p).expanduser()
    return q if q.is_absolute() else base / q
