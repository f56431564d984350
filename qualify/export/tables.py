"""The CSV files of `qualify export --csv DIR`: `requests.csv` (`qualify.export.requests`) and
`cells.csv` (`qualify.export.cells`); one header line of column names that carry their units,
an empty field where the evidence holds no figure."""

from __future__ import annotations

import csv
from collections.abc import Sequence
from dataclasses import astuple, dataclass, fields
from pathlib import Path

from qualify.export.cells import CellRow, Row, cells
from qualify.export.requests import RequestRow, requests
from qualify.present.reading import RunView

REQUESTS = "requests.csv"
CELLS = "cells.csv"


def write_rows(path: Path, kind: type[Row], rows: Sequence[Row]) -> None:
    with path.open("w", newline="", encoding="utf-8") as fh:
        out = csv.writer(fh)
        out.writerow(f.name for f in fields(kind))
        out.writerows(["" if v is None else v for v in astuple(r)] for r in rows)


@dataclass
class Tables:
    requests: list[RequestRow]
    cells: list[CellRow]


def tables(view: RunView) -> Tables:
    return Tables(requests(view), cells(view))


def write_tables(directory: Path, t: Tables) -> dict[str, int]:
    """Both files under `directory` (made when missing); the rows written to each."""
    directory.mkdir(parents=True, exist_ok=True)
    write_rows(directory / REQUESTS, RequestRow, t.requests)
    write_rows(directory / CELLS, CellRow, t.cells)
    return {REQUESTS: len(t.requests), CELLS: len(t.cells)}
