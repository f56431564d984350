"""`requests.csv`: every timed request of a verified run, one row each (docs/export.md).

Figures are the record's. The one exception is capacity's closed-loop streams: the record keeps
no per-stream timings there, so they are read from the exchange the stream kept, with the
client's own reader (`qualify.httpclient.chat.from_stream`, `qualify.httpclient.timing.timing`),
as `qualify verify` reads them to judge the stage again. Warm-ups are not timed: no row.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, replace

from qualify.ab.record import Record as AbRecord
from qualify.ab.record import Request
from qualify.capacity.loads import LoadStream, Soak
from qualify.capacity.record import CellFigures, RunStream
from qualify.capacity.record import Record as CapacityRecord
from qualify.context.record import Record as ContextRecord
from qualify.context.record import Stream
from qualify.evidence.kept import AttemptView, NotKept
from qualify.export.cells import Row, open_parts
from qualify.httpclient.chat import from_stream
from qualify.httpclient.timing import RequestTiming, timing
from qualify.present.reading import RunView, record_of

_PART = re.compile(r"\.part\d{3}$")


@dataclass
class RequestRow(Row):
    """One timed request. Times in seconds (`_s`) or milliseconds (`_ms`), rates in tokens per
    second, counts in tokens; None where the evidence holds no such figure."""

    stream: int | None = None
    prompt: str = ""
    prompt_tokens: int | None = None
    cached_tokens: int | None = None
    completion_tokens: int | None = None
    planned_send_s: float | None = None
    send_lag_ms: float | None = None
    ttfo_s: float | None = None
    ttft_s: float | None = None
    generation_s: float | None = None
    e2e_s: float | None = None
    decode_tok_per_s: float | None = None
    effective_prefill_tok_per_s: float | None = None
    itl_p50_ms: float | None = None
    itl_p95_ms: float | None = None
    finish_reason: str = ""
    outcome: str = "ok"
    evidence: str = ""


def outcome(**why: str | list[str] | None) -> str:
    """`ok`, or the first thing wrong with a request: `failed: ...`, `cut: ...`."""
    for name, value in why.items():
        if value:
            text = "; ".join(value) if isinstance(value, list) else value
            return f"{name}: {text}"
    return "ok"


_SAME = ("ttfo_s", "ttft_s", "generation_s", "e2e_s", "itl_p50_ms", "itl_p95_ms")


def _timed(row: RequestRow, t: Request | Stream | RequestTiming) -> RequestRow:
    """The timings every timed part of a record names alike (the client's `RequestTiming`, an
    A/B request, a context stream); decode and prefill take their units into the column name."""
    same = {k: getattr(t, k) for k in _SAME}
    return replace(
        row,
        **same,
        decode_tok_per_s=t.decode_tok_s,
        effective_prefill_tok_per_s=t.effective_prefill_tok_s,
    )


def _evidence(attempt: str, files: list[str]) -> str:
    return f"{attempt}/{files[0]}" if files else ""


def ab_requests(rec: AbRecord, attempt: str) -> Iterator[RequestRow]:
    for lane, got in rec.lanes.items():
        for r in got.runs:
            base = RequestRow("ab", "runs", lane, f"run-{r.run}", run=r.run)
            for i, q in enumerate(r.requests, 1):
                yield replace(
                    _timed(replace(base, stream=i), q),
                    prompt=q.prompt,
                    prompt_tokens=q.prompt_tokens,
                    cached_tokens=q.cached_tokens,
                    completion_tokens=q.completion_tokens,
                    finish_reason=q.finish_reason or "",
                    outcome=outcome(failed=q.failed, excluded=q.excluded, degenerate=q.degenerate),
                    evidence=_evidence(attempt, [q.file] if q.file else []),
                )


def context_requests(rec: ContextRecord, attempt: str) -> Iterator[RequestRow]:
    for row in rec.rows:
        cell = f"{row.planned_tokens} {row.pass_} {row.content} c={row.concurrency}"
        base = RequestRow("context", "ladder", "candidate", cell)
        for i, s in enumerate(row.streams, 1):
            yield replace(
                _timed(replace(base, stream=i), s),
                prompt_tokens=s.actual_prompt_tokens,
                cached_tokens=s.cached_tokens,
                completion_tokens=s.completion_tokens,
                finish_reason=s.finish_reason or "",
                outcome=outcome(failed=s.problem, degenerate=s.degenerate),
                evidence=_evidence(attempt, s.files),
            )


def _closed_row(base: RequestRow, st: RunStream, view: AttemptView | None) -> RequestRow:
    """A closed-loop stream: the record's outcome, the timings from its kept exchange."""
    row = replace(
        base,
        completion_tokens=st.completion_tokens,
        finish_reason=st.finish_reason or "",
        outcome=outcome(failed=st.failed, cut=st.cut, degenerate=st.degenerate, broken=st.broken),
        evidence=_evidence(view.attempt, st.files) if view else "",
    )
    if view is None or not st.files:
        return row
    try:
        t = timing(from_stream(view.exchange(_PART.sub("", st.files[0]))))
    except NotKept:
        return row
    return replace(_timed(row, t), prompt_tokens=t.prompt_tokens, cached_tokens=t.cached_tokens)


def _closed(base: RequestRow, cell: CellFigures, view: AttemptView | None) -> Iterator[RequestRow]:
    for r in cell.run_records:
        for i, st in enumerate(r.streams, 1):
            yield _closed_row(replace(base, run=r.run, stream=i), st, view)


def _load_row(base: RequestRow, st: LoadStream, attempt: str) -> RequestRow:
    return replace(
        base,
        completion_tokens=st.completion_tokens,
        planned_send_s=st.planned_s,
        send_lag_ms=st.lag_ms,
        ttft_s=st.ttft_s,
        e2e_s=st.e2e_s,
        decode_tok_per_s=st.decode_tok_s,
        finish_reason=st.finish_reason or "",
        outcome=outcome(failed=st.failed, cut=st.cut, unfinished=st.unfinished, broken=st.broken),
        evidence=_evidence(attempt, st.files),
    )


def capacity_requests(rec: CapacityRecord, view: AttemptView | None) -> Iterator[RequestRow]:
    attempt = view.attempt if view else ""
    for m in rec.matrix:
        yield from _closed(RequestRow("capacity", "matrix", m.lane, m.cell), m, view)
    for k in rec.kinds:
        yield from _closed(RequestRow("capacity", "kinds", "candidate", k.cell), k, view)
    load = rec.load
    for part, lane, c in open_parts(load):
        here = RequestRow("capacity", part, lane, "soak")
        if not isinstance(c, Soak):
            here = replace(here, cell=c.cell or c.label, step=c.step)
        for i, st in enumerate(c.streams, 1):
            yield _load_row(replace(here, stream=i), st, attempt)
    for t in load.sessions.turns if load.sessions else []:
        yield RequestRow(
            "capacity",
            "sessions",
            load.lane,
            f"s{t.session + 1}-t{t.turn}",  # sessions count from 1, as the decision says
            stream=t.session + 1,
            prompt_tokens=t.prompt_tokens,
            cached_tokens=t.cached_tokens,
            completion_tokens=t.completion_tokens,
            ttft_s=t.ttft_s,
            e2e_s=t.e2e_s,
            decode_tok_per_s=t.decode_tok_s,
            finish_reason=t.finish_reason or "",
            outcome=outcome(failed=t.failed, cut=t.cut, broken=t.broken or None),
            evidence=_evidence(attempt, t.files),
        )


def kept_view(view: RunView, stage: str) -> AttemptView | None:
    """The stage's authoritative attempt, read through the run's listed (sealed) files."""
    got = view.stages.get(stage)
    if got is None or got.result is None:
        return None
    return AttemptView(view.run.path, f"{stage}/{got.dir.name}", view.listing.files, got.result)


def requests(view: RunView) -> list[RequestRow]:
    """Every timed request the run's counted attempts kept, stage by stage."""
    records = view.records()
    rows: list[RequestRow] = []
    dirs = {name: f"{name}/{v.dir.name}" for name, v in view.stages.items()}
    if ab := record_of(records, "ab", AbRecord):
        rows += ab_requests(ab, dirs["ab"])
    if ctx := record_of(records, "context", ContextRecord):
        rows += context_requests(ctx, dirs["context"])
    if cap := record_of(records, "capacity", CapacityRecord):
        rows += capacity_requests(cap, kept_view(view, "capacity"))
    return rows
