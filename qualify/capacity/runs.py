"""One timed run of one capacity cell: c cold prompts in flight at once, between two idle checks,
with the engine's queue gauges and counters over the same window (docs/capacity.md, "A cell's
figures", which also says when a run is excluded).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable
from typing import TypedDict

from qualify.ab.acceptance import between
from qualify.capacity.answers import broken
from qualify.capacity.openloop import cancelled
from qualify.capacity.record import RunRecord, RunStream
from qualify.httpclient.chat import ChatOutcome, from_stream
from qualify.httpclient.client import Client, Exchange
from qualify.httpclient.degenerate import degenerate
from qualify.httpclient.load import Messages, drive
from qualify.httpclient.timing import median, percentile, timing, with_server_window
from qualify.serving.dialects import Dialect, busy
from qualify.serving.histograms import server_window
from qualify.serving.idle import IdleReport, scrape, wait_idle
from qualify.serving.sender import Sender

AFTER_GRACE_S = 5.0  # the engine may take a moment to free its slots after the last byte
QUEUE_POLL_S = 0.5
Meter = Callable[[float, float], dict[str, object]]  # energy over a monotonic window


class StreamRec(TypedDict, total=False):
    """One stream's figures (`stream_record`); an open-loop request adds its send offset and lag,
    one never answered carries only why (`unfinished`)."""

    failed: str | None
    cut: str | None
    unfinished: str
    degenerate: str | None
    finish_reason: str | None
    prompt_tokens: int | None
    cached_tokens: int | None
    completion_tokens: int | None
    token_chunks: int
    ttft_s: float | None
    e2e_s: float | None
    decode_tok_s: float | None
    answer: str
    broken: list[str]
    tool_calls: int
    files: list[str]
    planned_s: float
    lag_ms: float | None


def _failure(ex: Exchange, o: ChatOutcome) -> tuple[str | None, str | None]:
    """(failed, cut): a request the server refused or that broke, or a stream cut short."""
    if ex.error:
        return f"request failed: {ex.error}", None
    if o.error or (o.http_status is not None and o.http_status >= 400):
        return f"HTTP {o.http_status}: {o.error}", None
    if o.malformed:
        return None, f"{len(o.malformed)} malformed SSE events"
    if not o.done:
        return None, "stream ended without [DONE]"
    if o.completion_tokens is None:
        return None, "no usage.completion_tokens (include_usage not honoured)"
    return None, None


def stream_record(
    ex: Exchange, files: list[str], kind: str | None = None, max_tokens: int | None = None
) -> StreamRec:
    """One stream's figures; with `kind`, its answer judged (`broken`, empty when right)."""
    o = from_stream(ex)
    t = timing(o)
    failed, cut = _failure(ex, o)
    answered = failed is None and cut is None
    judged: list[str] = []
    if kind is not None and answered:
        body = ex.request_body if isinstance(ex.request_body, dict) else {}
        v = body.get("max_tokens") or body.get("max_completion_tokens")
        budget = max_tokens if max_tokens is not None else v if isinstance(v, int) else 1 << 30
        judged = broken(kind, o.content, o.finish_reason, t.completion_tokens, budget, o.tool_calls)
    return {
        "failed": failed,
        "cut": cut,
        "degenerate": degenerate(o.content) if answered else None,
        "finish_reason": o.finish_reason,
        "prompt_tokens": t.prompt_tokens,
        "cached_tokens": t.cached_tokens,
        "completion_tokens": t.completion_tokens,
        "token_chunks": t.token_chunks,
        "ttft_s": t.ttft_s if t.ttft_s is not None else t.ttfo_s,
        "e2e_s": t.e2e_s,
        "decode_tok_s": t.decode_tok_s,
        "answer": o.content[:200],
        "broken": judged,
        "tool_calls": len(o.tool_calls),
        "files": files,
    }


async def _watch_queue(
    client: Client, d: Dialect, running: list[float], waiting: list[float]
) -> None:
    """Polls the running and waiting gauges while a run is in flight (until cancelled)."""
    while True:
        snap = await scrape(client)
        now_running, now_waiting = busy(snap, d) if snap is not None else (None, None)
        running += [] if now_running is None else [now_running]
        waiting += [] if now_waiting is None else [now_waiting]
        await asyncio.sleep(QUEUE_POLL_S)


def _numbers(values: Iterable[object]) -> list[float]:
    return [float(v) for v in values if isinstance(v, int | float) and not isinstance(v, bool)]


def summarize(streams: list[StreamRec], window: float | None, /, **run: object) -> RunRecord:
    """The run (`run`, its other fields) with its figures from its streams, decode over the
    non-degenerate answered streams, its streams as the record keeps them, and its exclusion."""
    answered = [s for s in streams if not s.get("failed") and not s.get("cut")]
    speed = [s for s in answered if not s.get("degenerate")]
    tokens = sum(s.get("completion_tokens") or 0 for s in answered)
    chunks = sum(s.get("token_chunks", 0) for s in answered)
    ttft = _numbers(s.get("ttft_s") for s in answered)
    out = RunRecord.model_validate(
        run
        | {
            "requests": len(streams),
            "failed": sum(1 for s in streams if s.get("failed")),
            "cut": sum(1 for s in streams if s.get("cut")),
            "degenerate": sum(1 for s in answered if s.get("degenerate")),
            "completion_tokens": tokens,
            "window_s": window,
            "aggregate_output_tok_s": tokens / window if tokens and window else None,
            "decode_tok_s_p50": median(_numbers(s.get("decode_tok_s") for s in speed)),
            "ttft_p50_s": median(ttft),
            "ttft_p95_s": percentile(ttft, 95),
            "e2e_p50_s": median(_numbers(s.get("e2e_s") for s in answered)),
            "chunks_per_token": chunks / tokens if tokens else None,
            "prompt_tokens_p50": median(_numbers(s.get("prompt_tokens") for s in answered)),
            "streams": [
                {k: v for k, v in s.items() if k in RunStream.model_fields} for s in streams
            ],
        }
    )
    out._ttft_s, out.excluded = ttft, exclusion(out)
    return out


def exclusion(run: RunRecord) -> str | None:
    """Why a run is not counted in its cell's medians, or None."""
    before, after = run.idle.before, run.idle.after
    if before.idle is False:
        return f"not idle before the run: {before.reason}"
    if after is not None and after.idle is False:
        return f"not idle after the run: {after.reason}"
    if run.failed or run.cut:
        return f"{run.failed} failed and {run.cut} cut of {run.requests} requests"
    if run.degenerate:
        return f"{run.degenerate} degenerate answers (kept as evidence, not a speed)"
    return None


async def timed_run(
    s: Sender, prompts: list[Messages], label: str, kind: str = "prose", meter: Meter | None = None
) -> RunRecord:
    """Every prompt in flight at once between two idle checks; the run's record."""
    before = await wait_idle(s.client, s.dialect, s.idle_wait_s)
    idle = {"before": before.as_dict()}
    if before.idle is False:
        return summarize([], None, label=label, idle=idle, queue=None, acceptance=None)
    running: list[float] = []
    waiting: list[float] = []
    watch = asyncio.create_task(_watch_queue(s.client, s.dialect, running, waiting))
    try:
        bodies = [s.request(p) for p in prompts]
        m0 = time.monotonic()
        exchanges = await drive(s.client, bodies, len(bodies), timeout_s=s.timeout_s)
        m1 = time.monotonic()
    finally:
        await cancelled(watch)
    queue = {
        "scrapes": max(len(running), len(waiting)),
        "running_max": max(running) if running else None,
        "waiting_max": max(waiting) if waiting else None,
        "waiting_mean": sum(waiting) / len(waiting) if waiting else None,
    }
    energy = meter(m0, m1) if meter is not None else None
    after = await wait_idle(s.client, s.dialect, AFTER_GRACE_S)
    idle["after"] = after.as_dict()
    streams = [
        stream_record(ex, s.keep(f"{label}-s{i + 1}", ex), kind) for i, ex in enumerate(exchanges)
    ]
    # the run's window: first request sent to last response ended
    ends = [ex.t_sent + ex.t_end for ex in exchanges if ex.t_end is not None]
    window = max(ends) - min(ex.t_sent for ex in exchanges) if ends else None
    gen = after.since(before, s.dialect.generated)
    acc = between(before.snapshot, after.snapshot, s.dialect)
    fidelity = server_fidelity(before, after, s.dialect, exchanges, streams)
    run = {"label": label, "idle": idle, "queue": queue, "energy": energy, "acceptance": acc}
    return summarize(streams, window, **run, server_generated_tokens=gen, server_window=fidelity)


def server_fidelity(
    before: IdleReport, after: IdleReport, d: Dialect, exs: list[Exchange], streams: list[StreamRec]
) -> dict[str, object]:
    """The run's answered requests against the server's latency histograms (vLLM's) over it."""
    pairs = zip(exs, streams, strict=True)
    answered = [ex for ex, st in pairs if not st.get("failed") and not st.get("cut")]
    window = server_window(before.snapshot, after.snapshot, d, expected=len(answered))
    _, compared = with_server_window([timing(from_stream(ex)) for ex in answered], window)
    return compared
