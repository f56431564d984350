"""`cells.csv`: one row per cell or step of a verified run (ab runs, context cells, capacity's
matrix, kinds, load steps, soak, incumbent, replays and agent sessions: docs/export.md), with the
summary figures its stage's record holds (never computed again here)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace

from qualify.ab.record import Record as AbRecord
from qualify.capacity.loads import Load, OpenCell, Sessions, Soak
from qualify.capacity.record import CellFigures
from qualify.capacity.record import Record as CapacityRecord
from qualify.context.record import Record as ContextRecord
from qualify.evidence.store import RESULT
from qualify.present.reading import RunView, record_of


@dataclass
class Row:
    """Where a row of either table was measured: its first columns."""

    stage: str
    part: str
    lane: str
    cell: str
    step: int | None = None
    run: int | None = None


@dataclass
class CellRow(Row):
    """One cell or step. Times in seconds, rates in tokens (or requests) per second, goodput as
    a ratio of requests; None where the record holds no such figure."""

    prompt_tokens: float | None = None
    cached_tokens: float | None = None
    concurrency: int | None = None
    offered_rps: float | None = None
    achieved_rps: float | None = None
    requests: int | None = None
    failed: int | None = None
    cut: int | None = None
    ttfo_p50_s: float | None = None
    ttft_p50_s: float | None = None
    ttft_p95_s: float | None = None
    generation_p50_s: float | None = None
    e2e_p50_s: float | None = None
    decode_tok_per_s_p50: float | None = None
    effective_prefill_tok_per_s_p50: float | None = None
    aggregate_output_tok_per_s: float | None = None
    goodput_ratio: float | None = None
    goodput_rps: float | None = None
    j_per_output_token: float | None = None
    window_s: float | None = None
    verdict: str = ""
    evidence: str = ""


def ab_cells(rec: AbRecord, base: CellRow) -> Iterator[CellRow]:
    for lane, got in rec.lanes.items():
        for r in got.runs:
            yield replace(
                base,
                lane=lane,
                cell=f"run-{r.run}",
                run=r.run,
                requests=len(r.requests),
                failed=len(r.failed),
                ttfo_p50_s=r.p50.ttfo_s,
                ttft_p50_s=r.p50.ttft_s,
                generation_p50_s=r.p50.generation_s,
                e2e_p50_s=r.p50.e2e_s,
                decode_tok_per_s_p50=r.p50.decode_tok_s,
                aggregate_output_tok_per_s=r.aggregate_output_tok_s,
                j_per_output_token=r.energy.j_per_output_token if r.energy else None,
                window_s=r.wall_s,
            )


def context_cells(rec: ContextRecord, base: CellRow) -> Iterator[CellRow]:
    for row in rec.rows:
        yield replace(
            base,
            cell=f"{row.planned_tokens} {row.pass_} {row.content} c={row.concurrency}",
            prompt_tokens=row.actual_prompt_tokens,
            concurrency=row.concurrency,
            requests=len(row.streams),
            failed=sum(1 for s in row.streams if s.problem),
            ttfo_p50_s=row.ttfo_s,
            ttft_p50_s=row.ttft_s,
            generation_p50_s=row.generation_s,
            e2e_p50_s=row.e2e_s,
            decode_tok_per_s_p50=row.decode_tok_s,
            effective_prefill_tok_per_s_p50=row.effective_prefill_tok_s,
            aggregate_output_tok_per_s=row.aggregate_output_tok_s,
            verdict=row.verdict,
        )


def _closed(base: CellRow, c: CellFigures) -> CellRow:
    return replace(
        base,
        prompt_tokens=c.prompt_tokens_p50
        if c.prompt_tokens_p50 is not None
        else base.prompt_tokens,
        requests=c.requests,
        failed=c.failed,
        cut=c.cut,
        ttft_p50_s=c.ttft_p50_s,
        ttft_p95_s=c.ttft_p95_s,
        e2e_p50_s=c.e2e_p50_s,
        decode_tok_per_s_p50=c.decode_tok_s_p50,
        aggregate_output_tok_per_s=c.aggregate_output_tok_s,
        j_per_output_token=c.j_per_output_token,
    )


def _open(base: CellRow, c: OpenCell | Soak) -> CellRow:
    energy = c.energy.j_per_output_token if c.energy else None
    row = replace(
        base,
        requests=c.requests,
        failed=c.failed,
        cut=c.cut,
        goodput_ratio=c.goodput,
        goodput_rps=c.goodput_rps,
        j_per_output_token=energy,
        window_s=c.window_s,
    )
    if isinstance(c, Soak):
        return replace(row, cell="soak", offered_rps=c.rate_rps)
    return replace(
        row,
        cell=c.cell or c.label,
        step=c.step,
        offered_rps=c.offered_rps,
        achieved_rps=c.achieved_rps,
        aggregate_output_tok_per_s=c.output_tok_s,
    )


def capacity_cells(rec: CapacityRecord, base: CellRow) -> Iterator[CellRow]:
    matrix = replace(base, part="matrix")
    for m in rec.matrix:
        here = replace(matrix, lane=m.lane, cell=m.cell, prompt_tokens=m.length)
        yield replace(
            _closed(here, m),
            concurrency=m.concurrency,
            goodput_ratio=m.goodput,
            goodput_rps=m.goodput_rps,
        )
    for k in rec.kinds:
        size = k.sized_tokens if k.sized_tokens is not None else k.depth
        here = replace(base, part="kinds", cell=k.cell, prompt_tokens=size, concurrency=1)
        yield _closed(here, k)
    load = rec.load
    planned = load.length.planned_tokens if load.length else None
    for part, lane, c in open_parts(load):
        sized = None if part == "replay" else planned
        yield _open(replace(base, part=part, lane=lane, prompt_tokens=sized), c)
    if load.sessions is not None:
        yield from _sessions(replace(base, part="sessions", lane=load.lane), load.sessions)


def open_parts(load: Load) -> Iterator[tuple[str, str, OpenCell | Soak]]:
    """Each open-loop step with its part and lane: the steps and the burst, the soak, the
    incumbent's steps at the candidate's edge, each replay of a trace."""
    yield from (("load", load.lane, c) for c in load.cells)
    if load.soak is not None:
        yield "soak", load.lane, load.soak
    yield from (("load", "incumbent", c) for c in (load.incumbent.cells if load.incumbent else []))
    yield from (("replay", load.lane, c) for c in load.replay)


def _sessions(base: CellRow, s: Sessions) -> Iterator[CellRow]:
    yield replace(
        base,
        cell="sessions",
        concurrency=s.count,
        requests=s.requests,
        failed=s.broken,
        goodput_ratio=s.goodput,
        goodput_rps=s.goodput_rps,
        window_s=s.window_s,
    )
    for i, ttft in enumerate(s.ttft_p50_s_by_turn):
        turns = [t for t in s.turns if t.turn == i + 1]
        yield replace(
            base,
            cell=f"turn-{i + 1}",
            concurrency=s.count,
            requests=len(turns),
            failed=sum(1 for t in turns if t.failed or t.cut or t.broken),
            prompt_tokens=_at(s.prompt_tokens_by_turn, i),
            cached_tokens=_at(s.cached_tokens_by_turn, i),
            ttft_p50_s=ttft,
        )


def _at(xs: list[float | None], i: int) -> float | None:
    return xs[i] if i < len(xs) else None


def cells(view: RunView) -> list[CellRow]:
    """Every cell or step of the stages the decision counted, with its attempt's result."""
    records = view.records()
    evidence = {name: f"{name}/{v.dir.name}/{RESULT}" for name, v in view.stages.items()}
    rows: list[CellRow] = []
    if ab := record_of(records, "ab", AbRecord):
        rows += ab_cells(ab, CellRow("ab", "runs", "", "", evidence=evidence["ab"]))
    if ctx := record_of(records, "context", ContextRecord):
        base = CellRow("context", "ladder", "candidate", "", evidence=evidence["context"])
        rows += context_cells(ctx, base)
    if cap := record_of(records, "capacity", CapacityRecord):
        base = CellRow("capacity", "", "candidate", "", evidence=evidence["capacity"])
        rows += capacity_cells(cap, base)
    return rows
