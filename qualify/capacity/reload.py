"""The capacity stage's open-loop load rebuilt from the exchanges its attempt kept (`verify`):
the knee search's steps, the burst, the soak and the trace replays, each planned request that
was sent measured and judged again (`stream_record`), one never sent or never seen to end kept
as recorded (`unfinished`); the rest of the stage in `qualify.capacity.rebuild`, which says where
the lists of what is derived and what is taken as recorded are."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Literal

from qualify.capacity.edge import PREFIX, edge_steps
from qualify.capacity.knee import _knee, counts, holds, pace, step_plan
from qualify.capacity.loads import (
    Knee,
    Load,
    LoadStream,
    OpenCell,
    ReplayCell,
    Soak,
    soak_rate_from,
)
from qualify.capacity.openloop import burst
from qualify.capacity.parts import Part
from qualify.capacity.record import RunStream
from qualify.capacity.replay import label_of
from qualify.capacity.runs import StreamRec, stream_record
from qualify.capacity.settings import CapacitySettings
from qualify.capacity.slo import Slo, number
from qualify.capacity.soak import SOAK_SEED, drift, soak_offsets
from qualify.capacity.specdrift import acceptance_thirds
from qualify.capacity.spread import shard_label
from qualify.capacity.trace import (
    KEPT_TRACE,
    TraceError,
    TraceRow,
    offsets_of,
    prompt_of,
    read_trace,
    trace_sha256,
)
from qualify.evidence.kept import AttemptView, NotKept
from qualify.preflight.code import check_code

PART = re.compile(r"\.part\d{3}$")
_NUMBERED = re.compile(r"^\d{4}-(?P<rest>.+)$")
SOAK_ACCEPTANCE = "capacity-soak-acceptance"
REPLAY = "capacity-replay"
SESSIONS = "capacity-sessions"


def kept_stream(
    view: AttemptView,
    label: str,
    i: int,
    st: RunStream | LoadStream,
    kind: str | None,
    max_tokens: int | None,
    workers: int = 0,
) -> StreamRec:
    """Stream `i` (from 0) of a run or cell named `label`, measured again from its kept
    exchange, which must be the one the stage kept for it (`NNNN-<label>-s<i+1>.json`; of a
    cell on `workers` Ray workers, the shard of worker i mod workers: `<label>-w<k>-s<i+1>`)."""
    if not st.files:
        raise NotKept(f"{label} stream {i + 1}: names no kept exchange")
    name = PART.sub("", st.files[0])
    m = _NUMBERED.match(name)
    want = f"{label}-s{i + 1}"
    if workers > 1:
        want = shard_label(want, i, workers)
    if m is None or m.group("rest") != f"{want}.json":
        raise NotKept(f"{label} stream {i + 1}: its exchange {name} is another request's")
    rec = stream_record(view.exchange(name), list(st.files), kind, max_tokens)
    return _earlier_answers(view, st, rec)


# A stream's answer judgments, which the answer-checking code (`check_code("capacity")`) gives.
JUDGED: tuple[Literal["degenerate", "broken"], ...] = ("degenerate", "broken")


def _earlier_answers(view: AttemptView, st: RunStream | LoadStream, rec: StreamRec) -> StreamRec:
    """A record of other answer-checking code than this installation's (an earlier build wrote
    no `check_code`) keeps a judgment *against* an answer (degenerate, broken) that this code no
    longer makes, named in the notes: such a judgment can only block, so taking it as recorded
    hides nothing. An answer this code finds broken and the record calls right is never taken,
    and a record of this code is held to every judgment."""
    if view.sealed.get("check_code") == check_code("capacity"):
        return rec
    harsher = [k for k in JUDGED if getattr(st, k, None) and not rec.get(k)]
    if harsher:
        view.trust(
            "answers judged broken or degenerate by earlier answer-checking code that this "
            "code judges right (a judgment against the candidate, kept as recorded)"
        )
        for k in harsher:
            rec[k] = getattr(st, k)
    return rec


def cell_streams(
    view: AttemptView,
    cell: OpenCell | Soak,
    offsets: list[float],
    kind: str,
    max_tokens: int | None,
) -> list[dict[str, object]]:
    """Each planned request of an open-loop cell or the soak, at its planned offset: measured
    again from its exchange (on Ray, its worker's shard), or, never answered, as recorded (its
    `unfinished` says why)."""
    label = cell.label if isinstance(cell, OpenCell) else "soak"
    spread = cell.spread if isinstance(cell, OpenCell) else None
    workers = len(spread.workers) if spread is not None else 0
    if len(cell.streams) != len(offsets):
        raise NotKept(f"{label}: {len(cell.streams)} requests recorded, {len(offsets)} planned")
    out = []
    for i, (st, at) in enumerate(zip(cell.streams, offsets, strict=True)):
        if not (st.files or st.unfinished):
            raise NotKept(f"{label} stream {i + 1}: answered, but no exchange is kept")
        rec: dict[str, object] = (
            st.model_dump(mode="json")
            if not st.files
            else dict(kept_stream(view, label, i, st, kind, max_tokens, workers))
        )
        rec.update(planned_s=round(at, 4), lag_ms=st.lag_ms)
        out.append(rec)
    return out


def kept_trace(view: AttemptView, cell: OpenCell) -> list[TraceRow]:
    """The trace the stage kept (`KEPT_TRACE`), read again: the one the cell names by digest."""
    text = view.read_bytes(KEPT_TRACE).decode()
    want = cell.trace_sha256 if isinstance(cell, ReplayCell) else None
    if want and trace_sha256(text) != want:
        raise NotKept(f"{KEPT_TRACE}: not the trace {cell.label} replayed (SHA-256)")
    try:
        return read_trace(text)
    except TraceError as exc:
        raise NotKept(f"{KEPT_TRACE}: {exc}") from None


def per_token(cell: dict[str, object]) -> None:
    """The cell's J per output token, into its energy, where it has joules and tokens."""
    energy, tokens = cell.get("energy"), number(cell.get("completion_tokens"))
    if isinstance(energy, dict) and energy and tokens and energy.get("joules") is not None:
        energy["j_per_output_token"] = energy["joules"] / tokens


def replay_figures(
    streams: Sequence[Mapping[str, object]], slo: Slo, window_s: float | None, offsets: list[float]
) -> dict[str, object]:
    """A replay cell's or knee step's figures from its streams: counts, tokens, goodput (as every
    open-loop cell's), the offered and achieved rates and the pace."""
    out = counts(streams, slo, window_s)
    span = offsets[-1] if offsets else 0.0
    done = [s for s in streams if not s.get("unfinished")]
    tokens = number(out["completion_tokens"])
    out["offered_rps"] = (len(offsets) - 1) / span if span > 0 else None
    out["achieved_rps"] = len(done) / window_s if window_s else None
    out["output_tok_s"] = tokens / window_s if window_s and tokens else None
    out["pace"] = pace(streams) if span > 0 else None
    return out


def replay_again(
    view: AttemptView, sealed: ReplayCell, s: CapacitySettings, slo: Slo
) -> dict[str, object]:
    """A replay cell measured again (`verify`): its send offsets and prompts derived from the
    trace the attempt kept (`trace_checked`), each request from its kept exchange, the cell's
    figures from those with `replay_figures`."""
    if sealed.label != label_of(sealed.scale):
        raise NotKept(f"the replay cell {sealed.label} is not the one its scale names")
    offsets = trace_checked(view, sealed, s)
    streams = cell_streams(view, sealed, offsets, s.load.kind, None)
    cell = sealed.model_dump(mode="json") | replay_figures(streams, slo, sealed.window_s, offsets)
    per_token(cell)
    return cell


def trace_checked(view: AttemptView, cell: ReplayCell, s: CapacitySettings) -> list[float]:
    """The cell's send offsets from the kept trace at its scale, once every kept request was
    found to carry its row's prompt and `max_tokens`; a run of earlier code kept no trace, and
    its offsets and prompts are taken as recorded."""
    streams, label = cell.streams, cell.label
    if KEPT_TRACE not in view.names():
        view.trust("the replay's send offsets and prompts (the run kept no trace)")
        return [st.planned_s or 0.0 for st in streams]
    rows = kept_trace(view, cell)
    if len(rows) != len(streams):
        raise NotKept(f"{label}: {len(streams)} requests recorded, the trace holds {len(rows)}")
    for i, (row, st) in enumerate(zip(rows, streams, strict=True)):
        if not st.files:
            continue
        body = view.exchange(PART.sub("", st.files[0])).request_body or {}
        cap = min(row.output_length or s.max_tokens, s.max_tokens)
        asked = body.get("max_completion_tokens", body.get("max_tokens"))
        if body.get("messages") != prompt_of(row, i, s.replay.block_tokens) or asked != cap:
            raise NotKept(f"{label} stream {i + 1}: not the request of the trace's row {i + 1}")
    return offsets_of(rows, cell.scale or 1.0)


def _cell(
    view: AttemptView,
    sealed: OpenCell,
    s: CapacitySettings,
    slo: Slo,
    seed: int,
    k: int,
    prefix: str = "",
) -> dict[str, object]:
    """A Poisson step (the k-th cell of the search; `prefix` names the incumbent's repeat of
    it, `capacity.edge`) or the burst, measured again."""
    if sealed.arrival == "burst":
        offsets = burst(int(s.load.burst))
        label = f"load-burst-{s.load.burst}"
    else:
        rate = sealed.rate_rps or 0.0
        rows = kept_trace(view, sealed) if sealed.arrival == "trace" else None
        name, offsets = step_plan(s.load, rate, k, seed, rows) if rate > 0 else ("poisson", [])
        label = f"load-{prefix}{name}-{rate:.4g}rps"
    if sealed.label != label:
        raise NotKept(f"the load cell {sealed.label} is not the one its rate names ({label})")
    streams = cell_streams(view, sealed, offsets, s.load.kind, s.max_tokens)
    figures = replay_figures(streams, slo, sealed.window_s, offsets)
    if "pace" not in sealed.model_fields_set:  # a run before the pace rule has none to claim
        figures.pop("pace")
    cell = sealed.model_dump(mode="json") | figures
    per_token(cell)
    return cell


def _soak(
    view: AttemptView, sealed: Soak, s: CapacitySettings, slo: Slo, seed: int
) -> dict[str, object]:
    """The soak measured again: its arrivals from the recorded rate and duration."""
    rate, duration = sealed.rate_rps or 0.0, sealed.duration_s or 0.0
    if s.soak.rate_rps is not None and rate != s.soak.rate_rps:
        raise NotKept(f"the soak ran at {rate} req/s, the candidate asks {s.soak.rate_rps}")
    offsets = soak_offsets(rate, duration, seed + SOAK_SEED)
    kept = sealed.streams
    if len(offsets) != len(kept) and given(sealed, "planned") and sealed.planned == len(kept):
        # A soak of earlier code planned its arrivals otherwise (before it sent every arrival
        # within its duration): its own schedule, as recorded, is the one its streams followed.
        view.trust("the soak's arrival schedule (a run of earlier soak code planned it otherwise)")
        offsets = [st.planned_s or 0.0 for st in kept]
    streams = cell_streams(view, sealed, offsets, s.load.kind, s.max_tokens)
    out = sealed.model_dump(mode="json") | counts(streams, slo, sealed.window_s)
    out["planned"] = len(offsets)
    out["completion_tokens"] = sum(
        t
        for st in streams
        if not st.get("unfinished") and isinstance(t := st.get("completion_tokens"), int)
    )
    got = drift(streams)
    if given(sealed, "ttft_drift") and not given(sealed.ttft_drift, "per_third"):
        got.pop("per_third")  # a record made before: its drift is judged as it was
    out["ttft_drift"] = got
    if given(sealed, "acceptance_series"):
        series = sealed.acceptance_series or []
        out["acceptance_drift"] = acceptance_thirds(series).model_dump(mode="json")
    per_token(out)
    return out


def given(part: Part | None, field: str | None = None) -> bool:
    """Whether the sealed record wrote `part` (not empty), or its `field`."""
    fields = part.model_fields_set if part is not None else set()
    return bool(fields) if field is None else field in fields


def rebuild_load(
    view: AttemptView, sealed: Load, s: CapacitySettings, slo: Slo | None
) -> dict[str, object]:
    """The record's `load` as the kept exchanges give it."""
    out = sealed.model_dump(mode="json")
    if not given(sealed.soak, "acceptance_series"):
        view.earlier_form([SOAK_ACCEPTANCE], "the record predates the soak's acceptance series")
    if not given(sealed, "replay"):
        view.earlier_form([REPLAY], "the record holds no trace replay")
    if not given(sealed, "sessions"):
        view.earlier_form([SESSIONS], "the record holds no agent sessions")
    if not sealed.cells and not given(sealed.soak):
        return out
    if slo is None:
        raise NotKept("its load names no SLOs to judge it under")
    seed = int(view.sealed.get("seed") or 0)
    view.trust("each open-loop request's lag, and each cell's window and idle check")
    if any(given(c.spread) for c in sealed.cells):
        view.trust(
            "each Ray worker's clock probes, offset, lag and CPU time, and the harness verdict "
            "on them (the requests of every worker's shard are measured again here)"
        )
    cells, k = [], 0
    for c in sealed.cells:
        cells.append(_cell(view, c, s, slo, seed, k))
        k += c.arrival != "burst"
    out["cells"] = cells
    knee = None
    if sealed.knee is not None:
        view.trust("why the knee search stopped (its bounds are wall-clock)")
        out["knee"] = knee = _knee_again(cells, sealed.knee, slo)
    if sealed.soak is not None and given(sealed.soak):
        view.trust("the soak's watcher: health probes, counters, memory, timeline, a hang")
        out["soak"] = soak = _soak(view, sealed.soak, s, slo, seed)
        if "rate_from" in soak:  # an earlier build wrote none
            knee_rps = knee.rate_rps if knee is not None else None
            soak["rate_from"] = soak_rate_from(s.soak.rate_rps, knee_rps)
    if sealed.incumbent is not None and given(sealed.incumbent):
        edge = sealed.incumbent
        steps = edge_steps(sealed.cells, knee)
        ran = [(c.rate_rps or 0.0, (c.step or 0) - 1) for c in edge.cells]
        if edge.cells and ran != steps:
            raise NotKept(f"the incumbent's edge steps {ran} are not the search's edge {steps}")
        again = zip(edge.cells, steps, strict=False)
        redone = [_cell(view, c, s, slo, seed, k, PREFIX) for c, (_, k) in again]
        out["incumbent"] = edge.model_dump(mode="json") | {"cells": redone}
    return out


def _knee_again(cells: Sequence[Mapping[str, object]], sealed: Knee, slo: Slo) -> Knee:
    """The knee as the search keeps it (a step that was a harness error counted as neither)."""
    floor = slo.goodput_floor
    every = [OpenCell.model_validate(c) for c in cells]
    steps = [c for c in every if c.arrival != "burst" and not c.harness_error]
    good = next((c for c in reversed(steps) if holds(c, floor)), None)
    bad = next((c for c in reversed(steps) if not holds(c, floor)), None)
    return _knee(good, bad, sealed.stopped, slo, floor)
