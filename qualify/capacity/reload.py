"""The capacity stage's open-loop load rebuilt from the exchanges its attempt kept (`verify`):
the knee search's steps, the burst and the soak, each planned request that was sent measured and
judged again (`stream_record`), one never sent or never seen to end kept as recorded
(`unfinished`); the rest of the stage in `qualify.capacity.rebuild`, which says where the lists of
what is derived and what is taken as recorded are."""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from qualify.capacity.edge import PREFIX, edge_steps
from qualify.capacity.knee import _knee, counts, holds, pace, step_plan
from qualify.capacity.loads import Knee, soak_rate_from
from qualify.capacity.openloop import burst, poisson
from qualify.capacity.runs import StreamRec, stream_record
from qualify.capacity.settings import CapacitySettings
from qualify.capacity.slo import Slo, number
from qualify.capacity.soak import drift
from qualify.capacity.specdrift import acceptance_thirds
from qualify.capacity.spread import shard_label
from qualify.capacity.trace import KEPT_TRACE, TraceError, TraceRow, read_trace, trace_sha256
from qualify.evidence.kept import AttemptView, NotKept
from qualify.preflight.code import check_code

_PART = re.compile(r"\.part\d{3}$")
_NUMBERED = re.compile(r"^\d{4}-(?P<rest>.+)$")
SOAK_ACCEPTANCE = "capacity-soak-acceptance"
REPLAY = "capacity-replay"
SESSIONS = "capacity-sessions"
SOAK_SEED = 7919  # the soak's arrivals: the stage's seed plus this (`Capacity.load`)


def kept_stream(
    view: AttemptView,
    label: str,
    i: int,
    st: object,
    kind: str | None,
    max_tokens: int | None,
    workers: int = 0,
) -> StreamRec:
    """Stream `i` (from 0) of a run or cell named `label`, measured again from its kept
    exchange, which must be the one the stage kept for it (`NNNN-<label>-s<i+1>.json`; of a
    cell on `workers` Ray workers, the shard of worker i mod workers: `<label>-w<k>-s<i+1>`)."""
    files = st.get("files") if isinstance(st, dict) else None
    if not isinstance(files, list) or not files:
        raise NotKept(f"{label} stream {i + 1}: names no kept exchange")
    name = _PART.sub("", str(files[0]))
    m = _NUMBERED.match(name)
    want = f"{label}-s{i + 1}"
    if workers > 1:
        want = shard_label(want, i, workers)
    if m is None or m.group("rest") != f"{want}.json":
        raise NotKept(f"{label} stream {i + 1}: its exchange {name} is another request's")
    rec = stream_record(view.exchange(name), [str(f) for f in files], kind, max_tokens)
    return _earlier_answers(view, label, i, st, rec)


# A stream's answer judgments, which the answer-checking code (`check_code("capacity")`) gives.
JUDGED: tuple[Literal["degenerate", "broken"], ...] = ("degenerate", "broken")


def _earlier_answers(
    view: AttemptView, label: str, i: int, st: object, rec: StreamRec
) -> StreamRec:
    """A record of other answer-checking code than this installation's (an earlier build wrote
    no `check_code`) keeps a judgment *against* an answer (degenerate, broken) that this code no
    longer makes, named in the notes: such a judgment can only block, so taking it as recorded
    hides nothing. An answer this code finds broken and the record calls right is never taken,
    and a record of this code is held to every judgment."""
    if view.sealed.get("check_code") == check_code("capacity") or not isinstance(st, dict):
        return rec
    harsher = [k for k in JUDGED if st.get(k) and not rec.get(k)]
    if harsher:
        view.trust(
            "answers judged broken or degenerate by earlier answer-checking code that this "
            "code judges right (a judgment against the candidate, kept as recorded)"
        )
        for k in harsher:
            rec[k] = st[k]
    return rec


def _streams(
    view: AttemptView,
    cell: dict[str, Any],
    offsets: list[float],
    kind: str,
    max_tokens: int | None,
) -> list[dict[str, object]]:
    """Each planned request of an open-loop cell, at its planned offset: measured again from its
    exchange, or, never answered, as recorded (its `unfinished` says why)."""
    label, sealed = str(cell.get("label")), cell.get("streams") or []
    workers = len((cell.get("spread") or {}).get("workers") or [])
    if len(sealed) != len(offsets):
        raise NotKept(f"{label}: {len(sealed)} requests recorded, {len(offsets)} planned")
    out = []
    for i, (st, at) in enumerate(zip(sealed, offsets, strict=True)):
        if not isinstance(st, dict) or not (st.get("files") or st.get("unfinished")):
            raise NotKept(f"{label} stream {i + 1}: answered, but no exchange is kept")
        rec: dict[str, object] = (
            copy.deepcopy(st)
            if not st.get("files")
            else dict(kept_stream(view, label, i, st, kind, max_tokens, workers))
        )
        rec.update(planned_s=round(at, 4), lag_ms=st.get("lag_ms"))
        out.append(rec)
    return out


def kept_trace(view: AttemptView, cell: Mapping[str, object]) -> list[TraceRow]:
    """The trace the stage kept (`KEPT_TRACE`), read again: the one the cell names by digest."""
    text = view.read_bytes(KEPT_TRACE).decode()
    want = cell.get("trace_sha256")
    if want is not None and trace_sha256(text) != want:
        raise NotKept(f"{KEPT_TRACE}: not the trace {cell.get('label')} replayed (SHA-256)")
    try:
        return read_trace(text)
    except TraceError as exc:
        raise NotKept(f"{KEPT_TRACE}: {exc}") from None


def per_token(cell: dict[str, object]) -> None:
    """The cell's J per output token, into its energy, where it has joules and tokens."""
    energy, tokens = cell.get("energy"), number(cell.get("completion_tokens"))
    if isinstance(energy, dict) and energy and tokens and energy.get("joules") is not None:
        energy["j_per_output_token"] = energy["joules"] / tokens


def _cell(
    view: AttemptView,
    sealed: dict[str, Any],
    s: CapacitySettings,
    slo: Slo,
    seed: int,
    k: int,
    prefix: str = "",
) -> dict[str, Any]:
    """A Poisson step (the k-th cell of the search; `prefix` names the incumbent's repeat of
    it, `capacity.edge`) or the burst, measured again."""
    cell = copy.deepcopy(sealed)
    if cell.get("arrival") == "burst":
        offsets = burst(int(s.load.burst))
        label = f"load-burst-{s.load.burst}"
    else:
        rate = float(cell.get("rate_rps") or 0.0)
        rows = kept_trace(view, cell) if cell.get("arrival") == "trace" else None
        name, offsets = step_plan(s.load, rate, k, seed, rows) if rate > 0 else ("poisson", [])
        label = f"load-{prefix}{name}-{rate:.4g}rps"
    if cell.get("label") != label:
        raise NotKept(f"the load cell {cell.get('label')} is not the one its rate names ({label})")
    streams = _streams(view, cell, offsets, s.load.kind, s.max_tokens)
    window = cell.get("window_s")
    cell.update(counts(streams, slo, window))
    span = offsets[-1] if offsets else 0.0
    cell["offered_rps"] = (len(offsets) - 1) / span if span > 0 else None
    done = [st for st in streams if not st.get("unfinished")]
    cell["achieved_rps"] = len(done) / window if window else None
    if "pace" in cell:  # a run before the pace rule has none to claim
        cell["pace"] = pace(streams) if span > 0 else None
    tokens = cell["completion_tokens"]
    cell["output_tok_s"] = tokens / window if window and tokens else None
    per_token(cell)
    return cell


def _soak(
    view: AttemptView, sealed: dict[str, Any], s: CapacitySettings, slo: Slo, seed: int
) -> dict[str, Any]:
    """The soak measured again: its arrivals from the recorded rate and duration."""
    out = copy.deepcopy(sealed)
    rate, duration = float(out.get("rate_rps") or 0.0), float(out.get("duration_s") or 0.0)
    if s.soak.rate_rps is not None and rate != s.soak.rate_rps:
        raise NotKept(f"the soak ran at {rate} req/s, the candidate asks {s.soak.rate_rps}")
    n = max(1, math.ceil(rate * duration))
    offsets = [o for o in poisson(rate, 3 * n + 20, seed + SOAK_SEED) if o < duration] or [0.0]
    kept = out.get("streams") or []
    if len(offsets) != len(kept) and out.get("planned") == len(kept):
        # A soak of earlier code planned its arrivals otherwise (before it sent every arrival
        # within its duration): its own schedule, as recorded, is the one its streams followed.
        view.trust("the soak's arrival schedule (a run of earlier soak code planned it otherwise)")
        offsets = [float(st.get("planned_s") or 0.0) for st in kept]
    streams = _streams(view, {**out, "label": "soak"}, offsets, s.load.kind, s.max_tokens)
    out.update(counts(streams, slo, out.get("window_s")))
    out["planned"] = len(offsets)
    out["completion_tokens"] = sum(
        st.get("completion_tokens") or 0 for st in streams if not st.get("unfinished")
    )
    got = drift(streams)
    if "per_third" not in (sealed.get("ttft_drift", {"per_third": None}) or {}):
        got.pop("per_third")  # a record made before: its drift is judged as it was
    out["ttft_drift"] = got
    if "acceptance_series" in sealed:
        series = sealed.get("acceptance_series") or []
        out["acceptance_drift"] = acceptance_thirds(series).model_dump(mode="json")
    per_token(out)
    return out


def rebuild_load(
    view: AttemptView, sealed: object, s: CapacitySettings, slo: Slo | None
) -> dict[str, Any] | None:
    """The record's `load` as the kept exchanges give it; None when the record has none."""
    if not isinstance(sealed, dict):
        return None
    out = copy.deepcopy(sealed)
    if "acceptance_series" not in (out.get("soak") or {}):
        view.earlier_form([SOAK_ACCEPTANCE], "the record predates the soak's acceptance series")
    if "replay" not in out:
        view.earlier_form([REPLAY], "the record holds no trace replay")
    if "sessions" not in out:
        view.earlier_form([SESSIONS], "the record holds no agent sessions")
    if not out.get("cells") and not out.get("soak"):
        return out
    if slo is None:
        raise NotKept("its load names no SLOs to judge it under")
    seed = int(view.sealed.get("seed") or 0)
    view.trust("each open-loop request's lag, and each cell's window and idle check")
    if any(c.get("spread") for c in out.get("cells") or []):
        view.trust(
            "each Ray worker's clock probes, offset, lag and CPU time, and the harness verdict "
            "on them (the requests of every worker's shard are measured again here)"
        )
    cells, k = [], 0
    for c in out.get("cells") or []:
        cells.append(_cell(view, c, s, slo, seed, k))
        k += c.get("arrival") != "burst"
    out["cells"] = cells
    if out.get("knee") is not None:
        view.trust("why the knee search stopped (its bounds are wall-clock)")
        out["knee"] = _knee_again(cells, out["knee"], slo)
    if out.get("soak"):
        view.trust("the soak's watcher: health probes, counters, memory, timeline, a hang")
        out["soak"] = _soak(view, out["soak"], s, slo, seed)
        if "rate_from" in out["soak"]:  # an earlier build wrote none
            held = out.get("knee")
            knee_rps = held.rate_rps if isinstance(held, Knee) else None
            out["soak"]["rate_from"] = soak_rate_from(s.soak.rate_rps, knee_rps)
    if out.get("incumbent"):
        out["incumbent"] = _edge_again(view, out, s, slo, seed)
    return out


def _edge_again(
    view: AttemptView, load: dict[str, Any], s: CapacitySettings, slo: Slo, seed: int
) -> dict[str, Any]:
    """The incumbent's steps at the candidate's edge, measured again: they must repeat the
    rates and steps the rebuilt search gives (`edge.edge_steps`), each with that step's seed."""
    edge: dict[str, Any] = copy.deepcopy(load["incumbent"])
    steps = edge_steps(load.get("cells") or [], load.get("knee"))
    cells = edge.get("cells") or []
    ran = [(float(c.get("rate_rps") or 0.0), int(c.get("step") or 0) - 1) for c in cells]
    if cells and ran != steps:
        raise NotKept(f"the incumbent's edge steps {ran} are not the search's edge {steps}")
    again = zip(cells, steps, strict=False)
    edge["cells"] = [_cell(view, c, s, slo, seed, k, PREFIX) for c, (_, k) in again]
    return edge


def _knee_again(
    cells: Sequence[Mapping[str, object]], sealed: Mapping[str, object], slo: Slo
) -> Knee:
    """The knee as the search keeps it: the last step that held the floor and the last that did
    not, a step that was a harness error ending the search counted as neither."""
    floor = slo.goodput_floor
    steps = [c for c in cells if c.get("arrival") != "burst" and not c.get("harness_error")]
    good = next((c for c in reversed(steps) if holds(c, floor)), None)
    bad = next((c for c in reversed(steps) if not holds(c, floor)), None)
    return _knee(good, bad, str(sealed.get("stopped") or ""), slo, floor)
