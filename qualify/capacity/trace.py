"""A recorded trace, read and turned into requests (`qualify.capacity.replay` sends them).

Two forms, one JSON object a line (JSONL):

- the **Mooncake** form (the FAST'25 traces of kvcache-ai/Mooncake, `FAST25-release/traces`,
  which AIPerf's and vLLM's trace replay read): `timestamp` (the arrival in ms since the first
  request), `input_length` and `output_length` in tokens, and `hash_ids`, one id per prefix
  block of `block_tokens` tokens (512 in those traces; the last block may be partial): two
  requests whose `hash_ids` start alike share that prefix;
- qualify's **own** form, the same fields where they apply, and instead of lengths the request's
  `messages` as sent, with an optional `session` naming the agent session it belongs to.

A row given by lengths gets its prompt synthesized (`prompt_of`): a block id is the same run of
words wherever it appears (`block_text`), so the engine's prefix cache can serve a shared block;
a word stands in for a token (the engine's count of them is measured, not assumed).

A candidate names its trace by a path relative to its own file, or `shipped:<name>` for one of
the traces qualify ships (`traces/` of the checkout, `qualify/_assets/traces/` of the wheel).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qualify.assets import ROOT
from qualify.httpclient.load import Messages

MOONCAKE_BLOCK_TOKENS = 512
SHIPPED = "shipped:"
KEPT_TRACE = "replay-trace.jsonl"  # the trace as the capacity attempt keeps it


def trace_path(directory: Path, trace: str) -> Path:
    """Where the candidate's `replay.trace` is: beside its file, or among the shipped traces."""
    if trace.startswith(SHIPPED):
        return ROOT / "traces" / trace.removeprefix(SHIPPED)
    return directory / trace


# Plain words, none of them markup: a synthesized prompt is prose an engine reads as text.
_WORDS = (  # noqa: SIM905 (as a list: a line per word)
    "river stone lamp harbor window garden ledger signal copper meadow lantern "
    "valley engine bridge orchard compass thread market winter shelter canvas "
    "furnace beacon timber quarry pebble summit canyon glacier prairie"
).split()
_ASK = "Summarize the notes above in two sentences."


class TraceError(ValueError):
    """A trace line that is neither form."""


@dataclass(frozen=True)
class TraceRow:
    """One request of a trace."""

    t_ms: float
    input_length: int | None = None
    output_length: int | None = None
    hash_ids: tuple[int, ...] = ()
    messages: tuple[dict[str, Any], ...] = ()  # the trace's chat messages, raw JSON
    session: str | None = None


def _row(obj: object, n: int) -> TraceRow:
    if not isinstance(obj, dict):
        raise TraceError(f"line {n}: not a JSON object")
    t = obj.get("timestamp")
    if not isinstance(t, int | float) or t < 0:
        raise TraceError(f"line {n}: no timestamp (ms, at least 0)")
    msgs, length = obj.get("messages"), obj.get("input_length")
    if msgs is None and not isinstance(length, int):
        raise TraceError(f"line {n}: neither messages nor input_length")
    if msgs is not None and not (isinstance(msgs, list) and all(isinstance(m, dict) for m in msgs)):
        raise TraceError(f"line {n}: messages is not a list of messages")
    out = obj.get("output_length")
    ids = obj.get("hash_ids") or []
    if not all(isinstance(i, int) for i in ids):
        raise TraceError(f"line {n}: hash_ids holds a non-integer")
    session = obj.get("session")
    return TraceRow(
        t_ms=float(t),
        input_length=length if isinstance(length, int) else None,
        output_length=out if isinstance(out, int) and out > 0 else None,
        hash_ids=tuple(ids),
        messages=tuple(msgs or ()),
        session=None if session is None else str(session),
    )


def read_trace(text: str) -> list[TraceRow]:
    """The trace's rows in arrival order (ties keep the file's order); blank lines skipped."""
    rows = []
    for n, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise TraceError(f"line {n}: not JSON ({exc.msg})") from exc
            rows.append(_row(obj, n))
    if not rows:
        raise TraceError("the trace holds no request")
    return sorted(rows, key=lambda r: r.t_ms)


def trace_sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def block_text(block: int | str, words: int) -> str:
    """`words` words seeded by the block's id alone: the same id, the same text."""
    rng = random.Random(f"qualify-trace-block-{block}")
    return " ".join(rng.choice(_WORDS) for _ in range(max(0, words)))


def prompt_of(row: TraceRow, index: int, block_tokens: int = MOONCAKE_BLOCK_TOKENS) -> Messages:
    """The request's messages: as the trace gives them, else synthesized from its lengths and
    block ids (module docstring)."""
    if row.messages:
        return [dict(m) for m in row.messages]
    total = row.input_length or 0
    ids: list[int | str] = list(row.hash_ids)
    if not ids:
        ids = [f"r{index}-{k}" for k in range(max(1, -(-total // block_tokens)))]
    sizes = (min(block_tokens, total - k * block_tokens) for k in range(len(ids)))
    parts = [block_text(block, n) for block, n in zip(ids, sizes, strict=True) if n > 0]
    return [{"role": "user", "content": "\n".join([*parts, _ASK])}]


def offsets_of(rows: list[TraceRow], scale: float) -> list[float]:
    """Each row's send offset in seconds from the first, its time divided by `scale` (2: twice
    as fast as recorded)."""
    t0 = rows[0].t_ms
    return [round((r.t_ms - t0) / 1000.0 / scale, 6) for r in rows]


def arrivals(rows: list[TraceRow], rate_rps: float, n: int) -> list[float]:
    """`n` send offsets (s) in the trace's arrival pattern at a mean of `rate_rps`: its gaps in
    order (the trains and lulls it recorded), repeated from the start with a mean gap between
    the last row and the next round's first, all scaled by one factor so that the mean gap is
    1 / `rate_rps` (`load.arrival = "trace"`: the knee search's steps)."""
    gaps = [(b.t_ms - a.t_ms) / 1000.0 for a, b in itertools.pairwise(rows)]
    if not gaps or sum(gaps) <= 0:
        raise TraceError("the trace spans no time: it has no arrival pattern to scale")
    cycle = [*gaps, sum(gaps) / len(gaps)]
    factor = len(cycle) / sum(cycle) / rate_rps
    steps = (cycle[i % len(cycle)] * factor for i in range(n - 1))
    return [round(t, 6) for t in itertools.accumulate(steps, initial=0.0)][:n]
