"""`qualify export`: a signed run's results for CI views and dashboards (docs/export.md), read
from its sealed evidence once its decision verifies; nothing is measured again or written in it.

The CSV files (`--csv DIR`) are `requests.csv` and `cells.csv`: one header line of column names
that carry their units, an empty field where the evidence holds no figure."""

from __future__ import annotations

import csv
from collections.abc import Sequence
from dataclasses import astuple, fields
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from qualify.decision.alias_view import verified
from qualify.diff.runs import Side
from qualify.errors import BadInput
from qualify.evidence.store import EvidenceStore
from qualify.export.cells import CellRow, Row, cells
from qualify.export.requests import RequestRow, requests
from qualify.present.reading import RunView


def open_verified(ref: str, evidence: Path, keys: list[Ed25519PublicKey]) -> Side:
    """The run at `ref` (a run directory, a decision envelope, or a run id under `evidence`),
    once its newest envelope (or the one named) verifies by one of `keys`; BadInput otherwise."""
    path = Path(ref)
    if not path.exists():
        path = EvidenceStore(evidence).open_run(ref).path
    return verified("RUN", path, keys, "exported")


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


# Each file by name: the row type (its columns) and its rows.
Tables = dict[str, tuple[type[Row], Sequence[Row]]]


def tables(view: RunView) -> Tables:
    return {"requests.csv": (RequestRow, requests(view)), "cells.csv": (CellRow, cells(view))}


def write_tables(directory: Path, t: Tables) -> dict[str, int]:
    """Both files under `directory` (made when missing); the rows written to each."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, (kind, rows) in t.items():
        with (directory / name).open("w", newline="", encoding="utf-8") as fh:
            out = csv.writer(fh)
            out.writerow(f.name for f in fields(kind))
            out.writerows(["" if v is None else v for v in astuple(r)] for r in rows)
    return {name: len(rows) for name, (_, rows) in t.items()}
