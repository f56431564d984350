"""The two sides of a diff: a run, its signed decision verified first, and what it measured.

A side is read only after `qualify.decision.verify.verify` accepts its envelope (signature,
every subject re-hashed, the verdict derived again): the figures compared come from the result
files of the attempts the signed decision names, which verification has just re-hashed. The run
being decided right now (no envelope yet) is a side too (`unsigned`), for the decision document.
"""

from __future__ import annotations

import base64
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qualify.errors import BadInput
from qualify.evidence.signing import sha256_bytes
from qualify.evidence.store import RunDir, sha256_file
from qualify.identity.record import Record as IdentityRecord
from qualify.present.reading import record_of, run_info, run_view
from qualify.present.record import DecisionRecord
from qualify.records import StageRecord
from qualify.vram.record import Record as VramRecord

_ENVELOPE = re.compile(r"^attempt-(\d{3,})\.dsse\.json$")


@dataclass
class Side:
    """One run as the diff reads it: verified (or the run being decided), its stage data."""

    label: str
    run: RunDir
    record: DecisionRecord
    info: dict[str, Any]
    envelope: Path | None = None
    signer: str | None = None
    stages: list[str] = field(default_factory=list)
    records: dict[str, StageRecord] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def verified(self) -> bool:
        return self.envelope is not None

    def identity(self) -> dict[str, Any]:
        """The identity stage's pins (their JSON form), or nothing when it left no record."""
        rec = record_of(self.records, "identity", IdentityRecord)
        return rec.pins.model_dump(mode="json") if rec else {}

    def vram(self) -> VramRecord | None:
        return record_of(self.records, "vram", VramRecord)

    def describe(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "run": str(self.run.path),
            "run_id": self.run.run_id,
            "candidate": self.record.candidate,
            "decision": self.record.decision,
            "headline": self.record.headline,
            "decided_at": self.record.decided_at,
            "envelope": str(self.envelope) if self.envelope else None,
            "verified": self.verified,
            "signer": self.signer,
            "policy_sha256": self.record.policy_sha256,
            "stages": self.stages,
            "notes": self.notes,
        }


def latest_envelope(run: Path) -> Path | None:
    """The run's newest decision envelope (`decision/attempt-NNN.dsse.json`)."""
    d = run / "decision"
    found = [(int(m.group(1)), p) for p in d.glob("*.dsse.json") if (m := _ENVELOPE.match(p.name))]
    return max(found)[1] if found else None


def locate(ref: Path, action: str = "compared") -> tuple[Path, Path]:
    """(envelope, run) from a run directory (its newest envelope) or an envelope file inside
    a run (`<run>/decision/attempt-NNN.dsse.json`); `action` is what an unsigned run is not."""
    if ref.is_dir():
        if not (ref / "run.json").is_file():
            raise BadInput(
                f"{ref} is not a run directory",
                [f"RUN: expected a directory holding run.json, or a decision envelope (got {ref})"],
            )
        env = latest_envelope(ref)
        if env is None:
            raise BadInput(
                f"{ref} has no signed decision",
                [
                    f"RUN: expected {ref}/decision/attempt-NNN.dsse.json (sign the run with "
                    f"`qualify sign` first: an unsigned run is not {action})"
                ],
            )
        return env, ref.resolve()
    if ref.is_file():
        return ref, ref.resolve().parent.parent
    raise BadInput(f"{ref} does not exist", [f"RUN: expected a run directory or envelope ({ref})"])


def read_stages(side: Side) -> None:
    """Each stage's authoritative attempt, as the decision counted it: `stages` names those
    that left a result, `records` holds their typed records (read once, hash-checked)."""
    view = run_view(side.run, side.record)
    side.stages = list(view.stages)
    side.records = view.records()


def unsigned(label: str, run: RunDir, record: DecisionRecord) -> Side:
    """The run being decided, with the record the decision derives (not signed yet)."""
    side = Side(label, run, record, run_info(run))
    side.notes.append("the run being decided: its decision is not signed yet")
    read_stages(side)
    return side


def alias_target(table: Path, name: str) -> dict[str, Any]:
    """The alias's current target in the house table; BadInput when it points at nothing."""
    from qualify.trust.repository import read_table

    target = read_table(table).get(name)
    if not target:
        raise BadInput(
            f"alias {name!r} points at nothing in {table}",
            [f"--against-alias: expected an alias set by `qualify alias set` (got {name!r})"],
        )
    return target


def alias_run(target: dict[str, Any], evidence: Path) -> Path:
    """The signed envelope the alias was set on: under `<evidence>/*/<run_id>`, the newest
    decision envelope whose signed payload (or whole file) has the sha256 the alias table
    records."""
    run_id, want = str(target.get("run_id")), str(target.get("decision_sha256"))
    runs = [p for p in evidence.glob(f"*/{run_id}") if (p / "run.json").is_file()]
    for run in runs:
        for env in sorted((run / "decision").glob("attempt-*.dsse.json"), reverse=True):
            if want in (sha256_file(env), _payload_sha256(env)):
                return env
    where = f"{evidence}/*/{run_id}"
    raise BadInput(
        f"the qualification behind the alias is not under {evidence}",
        [
            f"--evidence: expected {where}/decision/attempt-NNN.dsse.json with sha256 "
            f"{want[:16]} (found {len(runs)} run director{'y' if len(runs) == 1 else 'ies'})"
        ],
    )


def _payload_sha256(envelope: Path) -> str | None:
    """The sha256 of an envelope's signed payload (what the alias table records), or None."""
    try:
        env = json.loads(envelope.read_bytes())
        return sha256_bytes(base64.b64decode(env["payload"], validate=True))
    except (OSError, ValueError, KeyError, TypeError):
        return None
