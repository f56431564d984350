"""One timed run of one lane: idle check, counters before, the prompts, counters after.

Both lanes go through this one function with the same plan, so the prompts, output budget,
sampling settings and timing boundaries should be the same; whether they were is judged from
what each request actually carried: every request records a digest of each field of the body
it sent (the body its evidence file keeps), and `paired` compares those between the lanes.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields

from qualify.ab.acceptance import between
from qualify.ab.prompts import ABPrompt, PromptSet
from qualify.ab.record import DegenerateAnswer, Energy, PromptWhy, Request, Run, RunP50
from qualify.ab.settings import ABSettings
from qualify.httpclient.chat import ChatOutcome, from_stream
from qualify.httpclient.client import Client, Exchange
from qualify.httpclient.degenerate import degenerate
from qualify.httpclient.timing import RequestTiming, median, timing, with_server_window
from qualify.serving.dialects import Dialect, MetricsSnapshot
from qualify.serving.histograms import server_window
from qualify.serving.idle import Idle, wait_idle
from qualify.vram.sampler import Parts, gpu_over, marked

IDLE = ("idle", "running", "waiting", "waited_s")  # what a run keeps of each idle check
PER_REQUEST = tuple(RunP50.model_fields)  # a run's p50 of each, over its counted requests
# A request's figures from a server's histograms over its run (`server_side`): not kept raw, so
# the rebuild takes them as recorded; all else of a request it derives from its exchange.
WINDOW = (
    "server_decode_tok_s",
    "server_prompt_ms",
    "decode_ratio_client_over_server",
    "ttft_minus_server_prompt_ms",
    "server_source",
)


@dataclass
class RunPlan:
    """What every lane's run r is sent: identical between lanes apart from the lane name."""

    run: int
    ps: PromptSet
    base: dict[str, object]  # the request body every prompt is sent with
    s: ABSettings
    bodies: list[dict[str, object]] = field(default_factory=list)  # each prompt's, in order

    def body(self, index: int, text: str, max_tokens: int | None = None) -> dict[str, object]:
        """With `nonce`, a unique first line per (run, prompt), so no request can reuse another's
        cached prefix; the same in both lanes, so paired requests stay byte-identical."""
        tag = hashlib.sha256(f"{self.s.seed or 0}:{self.run}:{index}".encode()).hexdigest()[:8]
        content = f"Request {self.run}.{index} ({tag})\n{text}" if self.s.nonce else text
        more = {} if max_tokens is None else {"max_tokens": max_tokens}
        return {**self.base, "messages": [{"role": "user", "content": content}], **more}


def sha_json(value: object) -> str:
    """sha256 of a value's JSON, keys sorted."""
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


def field_digests(body: object) -> dict[str, str]:
    """sha256 of each top-level field of a request body as sent, `model` included."""
    if not isinstance(body, dict):
        return {"(body)": sha_json(body)}
    return {k: sha_json(v) for k, v in sorted(body.items())}


def _count(v: object) -> int | None:
    """A count llama-server's `timings` gave (an integer), else None."""
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _excluded(o: ChatOutcome, failed: str | None, degenerate_why: str | None) -> str | None:
    if failed:
        return f"request failed: {failed}"
    if o.completion_tokens is None:
        return "no usage in the stream: tokens are counted from usage, never from SSE chunks"
    if degenerate_why:
        return f"degenerate answer ({degenerate_why}): kept as evidence, not counted as speed"
    if o.content.strip() or o.tool_calls:
        return None
    if o.reasoning.strip():
        return (
            f"reasoning used the budget with no visible answer (finish_reason="
            f"{o.finish_reason}, {o.completion_tokens} completion tokens)"
        )
    return f"no visible answer and no reasoning (finish_reason={o.finish_reason})"


def _failure(ex: Exchange, o: ChatOutcome) -> str | None:
    if ex.error:
        return ex.error
    if o.error:
        return f"HTTP {o.http_status}: {o.error}"
    if o.malformed:
        return f"malformed SSE data: {o.malformed[0][:80]!r}"
    if not o.done:
        return "the stream ended without [DONE]"
    return None


def request_record(prompt: ABPrompt, ex: Exchange, o: ChatOutcome, file: str) -> Request:
    """One request's figures; `excluded` says why it is left out of the aggregates."""
    t = timing(o)
    failed = _failure(ex, o)
    deg = degenerate(o.content) if failed is None else None
    tm = o.timings or {}
    n, gen = len(o.token_chunk_times), t.generation_s
    return Request(
        prompt=prompt.id,
        kind=prompt.kind,
        file=file,
        sent=field_digests(ex.request_body),
        failed=failed,
        excluded=_excluded(o, failed, deg),
        degenerate=deg,
        finish_reason=o.finish_reason,
        **t.as_dict(),
        network_chunks=len(ex.chunk_times),
        # decode tok/s as a chunk-counting client would get it: the figure the guard refuses
        decode_tok_s_if_chunks_counted=(n - 1) / gen if n > 1 and gen else None,
        draft_n=_count(tm.get("draft_n")),
        draft_n_accepted=_count(tm.get("draft_n_accepted")),
        content_sha256=hashlib.sha256(o.content.encode()).hexdigest(),
        visible_chars=len(o.content),
        reasoning_chars=len(o.reasoning),
    )


def timing_of(q: Request) -> RequestTiming:
    """A request record's timing, as `qualify.httpclient.timing.timing` measured it."""
    return RequestTiming(**{f.name: getattr(q, f.name) for f in fields(RequestTiming)})


async def idle_state(
    client: Client, d: Dialect, wait_s: float
) -> tuple[Idle, MetricsSnapshot | None]:
    """Wait for the engine to go idle: the gauges read, and the last scrape for the counters."""
    rep = await wait_idle(client, d, wait_s, poll_s=0.5)
    return Idle(**{k: getattr(rep, k) for k in IDLE}), rep.snapshot


Meter = Callable[[float, float], Mapping[str, object]]
Keep = Callable[[str, Exchange], list[str]]


async def _send(
    client: Client, keep: Keep, label: str, body: dict[str, object], timeout_s: float
) -> tuple[Exchange, ChatOutcome, str]:
    ex = await client.stream("/v1/chat/completions", body, timeout_s=timeout_s)
    files = keep(label, ex)
    return ex, from_stream(ex), files[0] if files else ""


def _as_recorded(q: Request) -> Request:
    """What the rebuild reads of a request: its prompt, its exchange, and its `WINDOW` figures."""
    window = {k: getattr(q, k) for k in WINDOW} if q.server_source is not None else {}
    return Request(prompt=q.prompt, file=q.file, **window)


def server_side(
    records: list[Request],
    before: MetricsSnapshot | None,
    after: MetricsSnapshot | None,
    d: Dialect,
) -> dict[str, object]:
    """The server's own figures for the run from its histograms (vLLM) between the idle scrapes
    around it; each answered request's record (changed in place) carries the comparison."""
    answered = [r for r in records if r.failed is None]
    window = server_window(before, after, d, expected=len(answered))
    filled, compared = with_server_window([timing_of(r) for r in answered], window)
    for r, t in zip(answered, filled, strict=True):
        for k, v in t.as_dict().items():
            setattr(r, k, v)
    return compared


def summary(run: Run, records: list[Request], wall: float) -> Run:
    """`run` with the figures of its requests: p50s, counts, and what was left out, and why."""
    counted = [r for r in records if r.excluded is None]
    answered = [r for r in records if r.failed is None]
    degenerate_answers = [
        DegenerateAnswer(prompt=r.prompt, why=r.degenerate, file=r.file)
        for r in answered
        if r.degenerate
    ]
    tokens = sum(r.completion_tokens or 0 for r in answered)
    chunks = sum(r.token_chunks for r in answered)
    p50 = {m: median([v for r in counted if (v := getattr(r, m)) is not None]) for m in PER_REQUEST}
    figures = {
        "p50": RunP50(**p50),
        # A degenerate answer's tokens are no measure of speed: the run gets no aggregate.
        "aggregate_output_tok_s": (
            tokens / wall if tokens and wall > 0 and not degenerate_answers else None
        ),
        "wall_s": wall,
        "counted": len(counted),
        "failed": [PromptWhy(prompt=r.prompt, why=r.failed) for r in records if r.failed],
        "excluded": [PromptWhy(prompt=r.prompt, why=r.excluded) for r in records if r.excluded],
        "degenerate": degenerate_answers,
        "sse_chunks": sum(r.sse_chunks for r in answered),
        "token_chunks": chunks,
        "completion_tokens": tokens,
        "chunks_per_token": chunks / tokens if tokens else None,
    }
    return run.model_copy(update=figures)


async def drive_run(
    client: Client,
    keep: Keep,
    lane: str,
    plan: RunPlan,
    d: Dialect,
    meter: Meter,
    parts: Parts | None,
) -> Run:
    """Warm up, check idle, read counters, send every prompt, read counters again; the window's
    energy from `meter` and each card's memory and power from `parts` (the GPU sampler's). The
    run holds what the rebuild takes as recorded, and the failed requests `run --plan` names."""
    warm = []  # warm-ups after each launch: kept as evidence, never counted
    for k in range(plan.s.warmups):
        body = plan.body(1000 + k, plan.ps.warmup, max_tokens=min(32, plan.s.max_tokens))
        label = f"{lane}-run{plan.run}-warmup{k + 1}"
        warm.append((await _send(client, keep, label, body, plan.s.timeout_s))[2])
    idle_before, before = await idle_state(client, d, plan.s.idle_wait_s)
    gate, part = asyncio.Semaphore(plan.s.concurrency), f"{lane}-run{plan.run}"

    async def one(i: int, p: ABPrompt) -> Request:
        async with gate:
            ex, o, f = await _send(client, keep, f"{part}-{p.id}", plan.bodies[i], plan.s.timeout_s)
            return request_record(p, ex, o, f)

    sends = (one(i, p) for i, p in enumerate(plan.ps.prompts))
    records, wall, *window = await marked(parts, part, lambda: asyncio.gather(*sends))
    idle_after, after = await idle_state(client, d, plan.s.idle_wait_s)
    acc = between(before, after, d)
    server = server_side(records, before, after, d)
    got = summary(Run(run=plan.run), records, wall)
    # the window's figures (`qualify.vram.energy.window_energy`) per output token
    e, tokens = Energy.model_validate(dict(meter(*window))), got.completion_tokens
    per = e.joules / tokens if e.joules is not None and tokens else None
    energy = e.model_copy(update={"completion_tokens": tokens, "j_per_output_token": per})
    gpu = gpu_over(parts, part, *window)
    return Run(
        run=plan.run,
        wall_s=wall,
        failed=got.failed,
        acceptance=acc,
        metrics_scraped=before is not None and after is not None,
        idle_before=idle_before,
        idle_after=idle_after,
        server_histograms=server,
        energy=energy,
        **({"gpu": gpu} if gpu is not None else {}),
        request_digest=sha_json([q.sent for q in records]),  # every field of every body as sent
        warmup_files=warm,
        requests=[_as_recorded(q) for q in records],
    )
