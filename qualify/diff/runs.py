"""The two sides of a diff: a run, its signed decision verified first, and what it measured.

A side is read only after `qualify.decision.verify.verify` accepts its envelope (signature,
every subject re-hashed, the verdict derived again): the figures compared come from the result
files of the attempts the signed decision names, which verification has just re-hashed. The run
being decided right now (no envelope yet) is a side too, for the decision document.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from qualify.errors import BadInput
from qualify.evidence.signing import sha256_bytes
from qualify.evidence.store import RunDir, sha256_file
from qualify.present.reading import RunView
from qualify.present.record import DecisionRecord
from qualify.records import StageRecord

_ENVELOPE = re.compile(r"^attempt-(\d{3,})\.dsse\.json$")


@dataclass
class Side:
    """One run as the diff reads it: verified (or the run being decided), read once (`view`,
    each stage's authoritative attempt as the signed decision counted it)."""

    label: str
    view: RunView
    record: DecisionRecord
    envelope: Path | None = None
    signer: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def verified(self) -> bool:
        return self.envelope is not None

    @property
    def run(self) -> RunDir:
        return self.view.run

    @property
    def records(self) -> dict[str, StageRecord]:
        return self.view.records()


def locate(ref: Path, action: str = "compared") -> tuple[Path, Path]:
    """(envelope, run) from a run directory (its newest envelope) or an envelope file inside
    a run (`<run>/decision/attempt-NNN.dsse.json`); `action` is what an unsigned run is not."""
    if ref.is_dir():
        if not (ref / "run.json").is_file():
            raise BadInput(
                f"{ref} is not a run directory",
                [f"RUN: expected a directory holding run.json, or a decision envelope (got {ref})"],
            )
        signed = [(int(m[1]), p) for p in ref.glob("decision/*") if (m := _ENVELOPE.match(p.name))]
        if not signed:
            raise BadInput(
                f"{ref} has no signed decision",
                [
                    f"RUN: expected {ref}/decision/attempt-NNN.dsse.json (sign the run with "
                    f"`qualify sign` first: an unsigned run is not {action})"
                ],
            )
        return max(signed)[1], ref.resolve()  # the newest envelope
    if ref.is_file():
        return ref, ref.resolve().parent.parent
    raise BadInput(f"{ref} does not exist", [f"RUN: expected a run directory or envelope ({ref})"])


def alias_target(table: Path, name: str) -> Mapping[str, object]:  # raw TOML table entry
    """The alias's current target in the house table; BadInput when it points at nothing."""
    from qualify.trust.repository import read_table

    target = read_table(table).get(name)
    if not target:
        raise BadInput(
            f"alias {name!r} points at nothing in {table}",
            [f"--against-alias: expected an alias set by `qualify alias set` (got {name!r})"],
        )
    return target


def alias_run(target: Mapping[str, object], evidence: Path) -> Path:
    """The signed envelope the alias was set on: under `<evidence>/*/<run_id>`, the newest
    decision envelope whose signed payload (or whole file) has the sha256 the alias table
    records."""
    run_id, want = str(target.get("run_id")), str(target.get("decision_sha256"))
    runs = [p for p in evidence.glob(f"*/{run_id}") if (p / "run.json").is_file()]
    for run in runs:
        for env in sorted((run / "decision").glob("attempt-*.dsse.json"), reverse=True):
            try:  # the sha256 of its signed payload, or of the whole file
                payload = base64.b64decode(json.loads(env.read_bytes())["payload"], validate=True)
            except (OSError, ValueError, KeyError, TypeError):
                payload = None
            if want in (sha256_file(env), payload and sha256_bytes(payload)):
                return env
    where = f"{evidence}/*/{run_id}"
    raise BadInput(
        f"the qualification behind the alias is not under {evidence}",
        [
            f"--evidence: expected {where}/decision/attempt-NNN.dsse.json with sha256 "
            f"{want[:16]} (found {len(runs)} run director{'y' if len(runs) == 1 else 'ies'})"
        ],
    )
