"""`qualify export --csv` on published signed runs: headers carry units; `requests.csv` has one
row per timed request the evidence kept (found by file name, not by the export's own reading),
with the record's figures; `cells.csv` one row per cell or step those requests belong to."""

from __future__ import annotations

import csv
import math
import statistics
from pathlib import Path

from export_checks import Exported, timed_exchanges

from qualify.ab.record import Record as AbRecord
from qualify.capacity.record import Record as CapacityRecord
from qualify.present.reading import record_of

# Columns that name or count something (no unit to carry); every other column is a figure.
NAMES = {"stage", "part", "lane", "cell", "step", "run", "stream", "prompt", "finish_reason"}
NAMES |= {"outcome", "evidence", "verdict", "concurrency", "requests", "failed", "cut"}
UNITS = ("_s", "_ms", "_tok_per_s", "_tok_per_s_p50", "_tokens", "_rps", "_ratio", "_token")


def _read(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    with path.open(newline="") as fh:
        reader = csv.DictReader(fh)
        rows = list(reader)
        return list(reader.fieldnames or []), rows


def _num(text: str) -> float | None:
    return float(text) if text else None


def test_headers_carry_units(roomy: Exported) -> None:
    for name in ("requests.csv", "cells.csv"):
        header, _ = _read(roomy.csv / name)
        figures = [c for c in header if c not in NAMES]
        assert figures and all(c.endswith(UNITS) for c in figures), (name, figures)
    header, _ = _read(roomy.csv / "requests.csv")
    assert {"ttft_s", "e2e_s", "decode_tok_per_s", "itl_p50_ms", "prompt_tokens"} <= set(header)
    header, _ = _read(roomy.csv / "cells.csv")
    assert {"ttft_p50_s", "decode_tok_per_s_p50", "aggregate_output_tok_per_s"} <= set(header)


def _one_row_per_timed_request(exported: Exported) -> list[dict[str, str]]:
    """A row per kept exchange of a timed request; besides, a row per open-loop request the
    record lists as planned but unfinished when its step stopped early (it kept no exchange,
    and counts against the step's goodput)."""
    _, rows = _read(exported.csv / "requests.csv")
    kept = timed_exchanges(exported.run, exported.side.record)
    assert kept, "the run kept timed requests"
    with_file = [r["evidence"] for r in rows if r["evidence"]]
    assert len(with_file) == len(kept) and set(with_file) == kept
    cap = record_of(exported.side.records, "capacity", CapacityRecord)
    load = cap.load if cap is not None else None
    cells = [*load.cells, *(load.incumbent.cells if load.incumbent else [])] if load else []
    unkept = sum(c.unfinished for c in cells) + (load.soak.unfinished if load and load.soak else 0)
    bare = [r for r in rows if not r["evidence"]]
    assert len(bare) == unkept
    assert all(
        r["part"] in ("load", "soak") and r["outcome"].startswith("unfinished") for r in bare
    )
    return rows


def test_a_row_per_timed_request_of_every_stage(roomy: Exported) -> None:
    rows = _one_row_per_timed_request(roomy)
    assert {(r["stage"], r["part"]) for r in rows} == {
        ("ab", "runs"),
        ("context", "ladder"),
        ("capacity", "matrix"),
        ("capacity", "kinds"),
    }


def test_a_row_per_open_loop_request(load_run: Exported) -> None:
    rows = _one_row_per_timed_request(load_run)
    parts = {r["part"] for r in rows}
    assert {"load", "soak", "matrix"} <= parts
    steps = [r for r in rows if r["part"] == "load" and r["step"]]
    assert steps and all(r["planned_send_s"] and r["send_lag_ms"] for r in steps)


def test_request_figures_are_the_records(roomy: Exported) -> None:
    """The A/B rows are the record's requests; capacity's closed-loop timings, read from the
    exchanges, give back each run's recorded median E2E."""
    _, rows = _read(roomy.csv / "requests.csv")
    by_file = {r["evidence"]: r for r in rows}
    records = roomy.side.records
    ab = record_of(records, "ab", AbRecord)
    assert ab is not None
    for lane in ab.lanes.values():
        for run in lane.runs:
            for q in run.requests:
                row = by_file[f"ab/attempt-001/{q.file}"]
                assert _num(row["e2e_s"]) == q.e2e_s and _num(row["ttft_s"]) == q.ttft_s
                assert row["prompt"] == q.prompt
    cap = record_of(records, "capacity", CapacityRecord)
    assert cap is not None
    checked = 0
    for m in cap.matrix:
        for run in m.run_records:
            files = [f"capacity/attempt-001/{s.files[0]}" for s in run.streams]
            e2e = [_num(by_file[f]["e2e_s"]) for f in files if by_file[f]["outcome"] == "ok"]
            if run.e2e_p50_s is None or len(e2e) != len(files):
                continue
            assert math.isclose(statistics.median(e2e), run.e2e_p50_s, rel_tol=1e-3), m.cell
            checked += 1
    assert checked


def test_a_row_per_cell_of_those_requests(roomy: Exported, load_run: Exported) -> None:
    for exported in (roomy, load_run):
        _, cells = _read(exported.csv / "cells.csv")
        _, rows = _read(exported.csv / "requests.csv")
        key = ("stage", "part", "lane", "cell")
        assert len(cells) == len({tuple(c[k] for k in key) for c in cells}), "one row a cell"
        assert {tuple(c[k] for k in key) for c in cells} == {tuple(r[k] for k in key) for r in rows}
        assert all(c["evidence"].endswith("/result.json") for c in cells)
