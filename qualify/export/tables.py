"""The CSV files of `qualify export --csv DIR`: `requests.csv` (`qualify.export.requests`) and
`cells.csv` (`qualify.export.cells`); one header line of column names that carry their units,
an empty field where the evidence holds no figure."""

from __future__ import annotations

import csv
from collections.abc import Sequence
from dataclasses import astuple, fields
from pathlib import Path

from qualify.export.cells import CellRow, Row, cells
from qualify.export.requests import RequestRow, requests
from qualify.present.reading import RunView

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
