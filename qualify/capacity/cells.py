"""The capacity stage's `qualify diff` cells (its spec's `cells`):
the candidate's matrix cells and content kinds."""

from __future__ import annotations

from qualify.capacity.record import CellFigures, Record
from qualify.present.cells import Cell, Measure, acceptance_counts, given, nums


def _capacity_figures(c: Cell, row: CellFigures) -> None:
    rv = row.run_values
    c.measures["decode_tok_s_p50"] = Measure("tok/s", "higher", nums(rv.decode_tok_s_p50))
    c.measures["aggregate_output_tok_s"] = Measure(
        "tok/s", "higher", nums(rv.aggregate_output_tok_s)
    )


def cells(rec: Record) -> list[Cell]:
    """The candidate's matrix cells and content kinds: per-run decode, aggregate, TTFT, E2E."""
    base = given(rec.settings, ("max_tokens", "ignore_eos", "level"))
    out: list[Cell] = []
    for e in rec.cells("candidate"):
        c = Cell("capacity", e.cell, {**base, "concurrency": e.concurrency})
        c.setting["length"] = e.length
        _capacity_figures(c, e)
        counted = [r for r in e.run_records if not r.excluded]
        c.measures["ttft_p50_s"] = Measure("s", "lower", nums(r.ttft_p50_s for r in counted))
        c.measures["e2e_p50_s"] = Measure("s", "lower", nums(r.e2e_p50_s for r in counted))
        out.append(c)
    for k in rec.kinds:
        c = Cell("capacity kinds", k.cell, {**base, "kind": k.kind, "depth": k.depth})
        _capacity_figures(c, k)
        out.append(c)
        if (counts := acceptance_counts(k.acceptance)) is not None:
            a = Cell("acceptance", f"kind {k.cell}", c.setting)
            a.measures["acceptance"] = Measure("rate", "higher", counts=counts)
            out.append(a)
    return out
