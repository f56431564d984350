"""Trace replay: a recorded trace (`qualify.capacity.trace`) sent through the open-loop sender
at its recorded pace and at each faster `scales` step, one cell per scale (`load-replay-<scale>x`),
its requests' `max_tokens` the rows' `output_length` capped by the stage's; every answer judged as
the load's are, and `verify` measures each request again from its kept exchange."""

from __future__ import annotations

from typing import Unpack

from qualify.candidate import LoadedCandidate
from qualify.capacity.knee import LaneArgs, measured
from qualify.capacity.openloop import Plan
from qualify.capacity.settings import ReplaySettings
from qualify.capacity.trace import (
    TraceError,
    TraceRow,
    arrivals,
    offsets_of,
    prompt_of,
    read_trace,
    trace_path,
    trace_sha256,
)
from qualify.serving.idle import wait_idle
from qualify.serving.sender import Sender
from qualify.stage import validator


def label_of(scale: float) -> str:
    return f"load-replay-{scale:g}x"


def body_of(
    sender: Sender, row: TraceRow, i: int, block_tokens: int, cap: int
) -> dict[str, object]:
    """The request of row `i`: its messages, its output length as `max_tokens` (capped)."""
    body = sender.request(prompt_of(row, i, block_tokens))
    key = "max_completion_tokens" if "max_completion_tokens" in body else "max_tokens"
    body[key] = min(row.output_length or cap, cap)
    return body


async def replay_cell(
    sender: Sender,
    rows: list[TraceRow],
    *,
    scale: float,
    block_tokens: int,
    drain_s: float,
    **lane: Unpack[LaneArgs],
) -> dict[str, object]:
    """The trace sent once at `scale`, after an idle check; the cell's record."""
    label, cap = label_of(scale), lane["max_tokens"]
    before = await wait_idle(sender.client, sender.dialect, sender.idle_wait_s)
    offsets = offsets_of(rows, scale)
    bodies = [body_of(sender, r, i, block_tokens, cap) for i, r in enumerate(rows)]
    plan = Plan(bodies, offsets, offsets[-1] + drain_s, timeout_s=sender.timeout_s)
    meter, lag = lane.get("meter"), lane["lag_bound_ms"]
    _, _, tally = await measured(sender, plan, label, lane["kind"], None, lag, meter)
    return tally | {
        "label": label,
        "cell": f"replay-{scale:g}x",
        "arrival": "trace",
        "scale": scale,
        "idle_before": before.as_dict(),
        "sessions": len({r.session for r in rows if r.session is not None}),
    }


async def replays(
    sender: Sender, text: str, s: ReplaySettings, common: LaneArgs, drain_s: float
) -> list[dict[str, object]]:
    """The candidate's trace (`s.trace`, whose text the stage read and kept) replayed at each
    of its scales, in order."""
    rows = read_trace(text)
    out = []
    for scale in s.scales:
        cell = await replay_cell(
            sender, rows, scale=scale, block_tokens=s.block_tokens, drain_s=drain_s, **common
        )
        out.append(cell | {"trace": str(s.trace), "trace_sha256": trace_sha256(text)})
    return out


@validator
def _check_trace(loaded: LoadedCandidate) -> list[str]:
    """The trace the candidate replays reads, before anything is sent: one line naming the
    field, the file and what is wrong with it."""
    cand = loaded.candidate
    trace = cand.stages.capacity.replay.trace
    if "capacity" not in cand.stages.run or trace is None:
        return []
    where = trace_path(loaded.directory, trace)
    try:
        rows = read_trace(where.read_text())
        if cand.stages.capacity.load.arrival == "trace":
            arrivals(rows, 1.0, 2)  # the knee steps follow its pattern: it must span time
    except (OSError, UnicodeDecodeError, TraceError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        return [f"stages.capacity.replay.trace: {where}: {why} (expected a JSONL trace)"]
    return []
