"""`qualify export`: a signed run's results for CI views and dashboards (docs/export.md), read
from its sealed evidence once its decision verifies; nothing is measured again or written in it."""

from __future__ import annotations

from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from qualify.decision.alias_view import verified
from qualify.diff.runs import Side
from qualify.errors import BadInput
from qualify.evidence.store import EvidenceStore

ACTION = "exported"


def open_verified(ref: str, evidence: Path, keys: list[Ed25519PublicKey]) -> Side:
    """The run at `ref` (a run directory, a decision envelope, or a run id under `evidence`),
    once its newest envelope (or the one named) verifies by one of `keys`; BadInput otherwise."""
    path = Path(ref)
    if not path.exists():
        path = EvidenceStore(evidence).open_run(ref).path
    return verified("RUN", path, keys, ACTION)


def alias_of(side: Side) -> str | None:
    """The production alias the candidate gates (its `[alias]`, from the run's own copy)."""
    cand = side.view.candidate
    return cand.alias.name if cand is not None and cand.alias is not None else None


def outside_run(side: Side, flag: str, path: Path) -> None:
    """BadInput when an output path lies inside the sealed run (writing there would add a
    file the decision did not seal)."""
    run = side.run.path.resolve()
    target = path.resolve()
    if target == run or run in target.parents:
        raise BadInput(
            f"{path} is inside the run {run}",
            [f"{flag}: expected a path outside the sealed run (got {path})"],
        )
