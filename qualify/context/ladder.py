"""One timed cell of the context ladder: c concurrent streams between two idle checks.

A cell is counted only when the engine was idle right before it and idle again right after
it; otherwise its row is `error` and its figures are kept but never published as a result.
The run's GPU sampler marks the cell's timed sends as a part of the stage (named as the cell's
evidence files are), and the row keeps each card's lowest free memory and mean power over them.
Tokens come from `usage` (`stream_options.include_usage`), timings from `qualify.httpclient.timing`.
A degenerate answer (`qualify.httpclient.degenerate`: one n-gram repeating, a digit run) is
flagged on its stream and kept, but left out of the row's decode figures: a drafter accepts such
text wholesale, so its "speed" says nothing about the candidate.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

from qualify.ab.acceptance import between
from qualify.ab.record import Acceptance
from qualify.context.corpus import Needles
from qualify.context.record import DegenerateMark, Pass, Row, Stream, StreamServer
from qualify.context.tasks import Tasks, judge_combined
from qualify.httpclient.chat import ChatOutcome
from qualify.httpclient.degenerate import degenerate
from qualify.httpclient.load import Messages
from qualify.httpclient.timing import RequestTiming, ServerComparison, median, timing
from qualify.records import Verdict
from qualify.serving.histograms import server_window
from qualify.serving.idle import Idle, IdleAround, IdleReport, wait_idle
from qualify.serving.sender import Sender
from qualify.vram.sampler import Parts, gpu_over, marked

# After the last byte of a stream the engine may take a moment to free the slot.
AFTER_GRACE_S = 5.0
# Figures of the prompt, over every stream; figures of the answer, over non-degenerate ones.
PROMPT_KEYS = ("ttfo_s", "ttft_s", "effective_prefill_tok_s")
DECODE_KEYS = ("decode_tok_s", "generation_s", "e2e_s", "itl_p50_ms", "itl_p95_ms")


@dataclass
class Cell:
    """What to send: the rung, the pass, and one prompt per concurrent stream."""

    target: int
    pass_: Pass
    content: str
    planned_tokens: int
    sized_tokens: int
    prompts: list[Messages]
    needles: Needles
    tasks: Tasks | None = None


def stream_problem(o: ChatOutcome) -> str | None:
    """Why a stream cannot be counted, or None."""
    if o.error:
        return f"request failed: {o.error}"
    if o.http_status is not None and o.http_status >= 400:
        return f"HTTP {o.http_status}"
    if o.malformed:
        return f"{len(o.malformed)} malformed SSE events"
    if not o.done:
        return "stream ended without [DONE]"
    if o.completion_tokens is None:
        return "no usage.completion_tokens in the stream (include_usage not honoured)"
    return None


# The figures a stream takes from its timing under the same name.
TIMED = (
    *("cached_tokens", "completion_tokens", "ttfo_s", "ttft_s", "effective_prefill_tok_s"),
    *("decode_tok_s", "generation_s", "e2e_s", "itl_p50_ms", "itl_p95_ms"),
    *("sse_chunks", "chunks_per_token"),
)


def stream_row(
    o: ChatOutcome, t: RequestTiming, needles: Needles, files: list[str], tasks: Tasks | None
) -> Stream:
    return Stream(
        actual_prompt_tokens=t.prompt_tokens,
        **{k: getattr(t, k) for k in TIMED},
        finish_reason=o.finish_reason,
        needles=needles.found(o.content),
        tasks=judge_combined(o.content, tasks) if tasks and tasks.items else {},
        answer=o.content,
        degenerate=degenerate(o.content),
        reasoning=o.reasoning,
        problem=stream_problem(o),
        server=StreamServer(
            decode_tok_s=t.server_decode_tok_s,
            prompt_ms=t.server_prompt_ms,
            decode_ratio=t.decode_ratio_client_over_server,
            ttft_minus_server_prompt_ms=t.ttft_minus_server_prompt_ms,
        ),
        files=files,
    )


def _med(values: Sequence[float | None]) -> float | None:
    return median([float(v) for v in values if v is not None])


def aggregate_rate(streams: list[Stream], span_s: float) -> float | None:
    """The cell's output tok/s over its wall span: none when a stream has no usage tokens or a
    degenerate answer (its tokens are no measure of speed). The span is not kept raw: the
    stage records this figure and the rebuild takes it as recorded."""
    done = [s.completion_tokens for s in streams if s.completion_tokens is not None]
    whole = len(done) == len(streams) and not any(s.degenerate for s in streams)
    return sum(done) / span_s if done and whole and span_s > 0 else None


def summarize(row: Row, streams: list[Stream]) -> None:
    """Row figures: medians over the cell's streams (decode figures over its non-degenerate
    ones); cached tokens the largest of them."""
    row.degenerate = [
        DegenerateMark(stream=i + 1, reason=s.degenerate)
        for i, s in enumerate(streams)
        if s.degenerate
    ]
    for k in PROMPT_KEYS:
        setattr(row, k, _med([getattr(s, k) for s in streams]))
    for k in DECODE_KEYS:
        setattr(row, k, _med([getattr(s, k) for s in streams if not s.degenerate]))
    prompt = _med([s.actual_prompt_tokens for s in streams])
    row.actual_prompt_tokens = None if prompt is None else round(prompt)
    cached = [s.cached_tokens for s in streams if s.cached_tokens is not None]
    row.cached_tokens = max(cached) if len(cached) == len(streams) else None
    done = [s.completion_tokens for s in streams if s.completion_tokens is not None]
    row.completion_tokens = sum(done) if len(done) == len(streams) else None
    row.notes = [
        f"stream {d.stream} answer is degenerate ({d.reason}): left out of the decode "
        "figures" + (" and the aggregate rate" if len(streams) > 1 else "")
        for d in row.degenerate
    ]
    row.needles = {d: all(s.needles[d] for s in streams) for d in ("50", "99")}
    row.answer = streams[0].answer if streams else ""


def verdict(row: Row, streams: list[Stream], needles: Needles) -> None:
    """The cell's verdict from its streams: error on a stream that cannot be counted, fail on a
    needle missed."""
    if problems := [f"stream {i + 1}: {s.problem}" for i, s in enumerate(streams) if s.problem]:
        row.verdict, row.reasons = Verdict.ERROR.value, problems
        return
    missed = [
        f"stream {i + 1} missed the {d}% needle ({needle.value}); answer {s.answer[:160]!r}"
        + (" (cut at max_tokens: finish_reason length)" if s.finish_reason == "length" else "")
        for i, s in enumerate(streams)
        for d, needle in zip(("50", "99"), needles.pair, strict=True)
        if not s.needles[d]
    ]
    row.verdict = Verdict.FAIL.value if missed else Verdict.PASS.value
    row.reasons = missed


def _idle_error(row: Row, when: str, report: IdleReport) -> Row:
    row.verdict = Verdict.ERROR.value
    row.reasons = [f"not counted: {when} the cell, {report.reason}"]
    return row


async def run_cell(drv: Sender, cell: Cell, parts: Parts | None = None) -> Row:
    """Run one cell and return its draft row: what the rebuild (`qualify.context.rebuild`)
    takes as recorded (the idle checks, the sampler's figures over the cell, the server's
    latency-histogram window, the counters' deltas, the aggregate rate over the cell's span)
    and each stream's evidence files, from which it derives everything else."""
    before = await wait_idle(drv.client, drv.dialect, drv.idle_wait_s)
    row = Row(
        target=cell.target,
        pass_=cell.pass_,
        content=cell.content,
        concurrency=len(cell.prompts),
        planned_tokens=cell.planned_tokens,
        sized_tokens=cell.sized_tokens,
        idle=IdleAround(before=Idle.model_validate(before.as_dict())),
    )
    if before.idle is False:  # nothing sent: the row is all as recorded
        for k in (*PROMPT_KEYS, *DECODE_KEYS, "actual_prompt_tokens", "cached_tokens"):
            setattr(row, k, None)
        row.completion_tokens, row.aggregate_output_tok_s = None, None
        row.streams, row.needles, row.answer = [], {"50": False, "99": False}, ""
        row.degenerate, row.notes = [], []
        return _idle_error(row, "before", before)
    label = f"ctx-{cell.target}-{cell.content}-c{len(cell.prompts)}-{cell.pass_}"
    sends = (drv.send(p, f"{label}-s{i + 1}") for i, p in enumerate(cell.prompts))
    sent, span, m0, m1 = await marked(parts, label, lambda: asyncio.gather(*sends))
    after = await wait_idle(drv.client, drv.dialect, AFTER_GRACE_S)
    row.idle.after = Idle.model_validate(after.as_dict())
    if (gpu := gpu_over(parts, label, m0, m1)) is not None:
        row.gpu = gpu
    streams = [stream_row(o, timing(o), cell.needles, files, cell.tasks) for o, files in sent]
    row.streams = [Stream(files=s.files) for s in streams]
    # An engine that reports no figures per request (vLLM) is compared over the cell from its
    # latency histograms, between the idle scrapes around it (the rebuild compares them).
    counted = sum(not s.problem for s in streams)
    window = server_window(before.snapshot, after.snapshot, drv.dialect, expected=counted)
    row.server_window = ServerComparison.model_validate(
        {"window": None if window is None else window.as_dict()}
    )
    row.aggregate_output_tok_s = aggregate_rate(streams, span)
    row.cached_tokens_metric_delta = after.since(before, drv.dialect.prompt_cached)
    if before.snapshot is not None and after.snapshot is not None:
        got = between(before.snapshot, after.snapshot, drv.dialect)
        unmeasured = {"unmeasured": "no speculation: no draft counters"}
        row.acceptance = Acceptance.model_validate(got or unmeasured)
    if after.idle is False:
        return _idle_error(row, "after", after)
    return row


def warm_note(row: Row) -> Row:
    """A warm row that was not served from the prefix cache says so (it is still published)."""
    cached, prompt = row.cached_tokens, row.actual_prompt_tokens
    if row.pass_ == "warm" and cached is not None and prompt is not None and cached < 0.9 * prompt:
        row.notes.append(
            f"the warm pass reused only {cached} of {prompt} prompt tokens from the cache"
        )
    return row
