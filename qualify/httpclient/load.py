"""Driving c concurrent streams, and the figures a load run yields.

`drive` keeps exactly `concurrency` streams in flight (closed loop: a stream that ends is
replaced by the next body) on one event loop, with no extra threads or processes, so the client
adds no CPU contention of its own beyond reading. `warm` opens the connections before timing
starts. `figures` reports per-stream decode (each request's own tok/s, tokens from `usage`) and
the aggregate output tok/s (all completion tokens over the wall-clock window from the first
request sent to the last response ended).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

from qualify.httpclient.chat import from_stream
from qualify.httpclient.client import Client, Exchange
from qualify.httpclient.timing import RequestTiming, median, percentile, timing

Messages = list[dict[str, str]]
Keep = Callable[[str, Exchange], list[str]]

CHAT = "/v1/chat/completions"


async def warm(client: Client, concurrency: int, path: str = "/health") -> list[Exchange]:
    """Open `concurrency` keep-alive connections (concurrent GETs) before anything is timed."""
    return list(await asyncio.gather(*(client.get(path) for _ in range(concurrency))))


async def drive(
    client: Client,
    bodies: Sequence[object],
    concurrency: int,
    timeout_s: float | None = None,
) -> list[Exchange]:
    """Stream every body with `concurrency` requests in flight; exchanges in `bodies` order."""
    if concurrency < 1:
        raise ValueError(f"concurrency must be at least 1, got {concurrency}")
    results: list[Exchange | None] = [None] * len(bodies)
    queue = iter(enumerate(bodies))

    async def worker() -> None:
        # Sharing one iterator between tasks on one loop is safe: next() never awaits.
        for i, body in queue:
            results[i] = await client.stream(CHAT, body, timeout_s)

    async with asyncio.TaskGroup() as tg:
        for _ in range(min(concurrency, len(bodies))):
            tg.create_task(worker())
    return [ex for ex in results if ex is not None]


@dataclass
class LoadFigures:
    concurrency: int
    requests: int
    failed: int
    completion_tokens: int
    window_s: float | None
    aggregate_output_tok_s: float | None
    decode_tok_s_median: float | None
    decode_tok_s_p5: float | None
    decode_tok_s_p95: float | None
    per_stream_decode_tok_s: list[float | None]

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def figures(exchanges: Sequence[Exchange], concurrency: int) -> LoadFigures:
    """Per-stream and aggregate figures of one `drive` run."""
    timings: list[RequestTiming] = [timing(from_stream(ex)) for ex in exchanges]
    ok = [ex for ex in exchanges if ex.ok]
    tokens = sum(t.completion_tokens or 0 for t in timings)
    window = None
    if ok:
        start = min(ex.t_sent for ex in ok)
        window = max(ex.t_sent + (ex.t_end or 0.0) for ex in ok) - start
    per_stream = [t.decode_tok_s for t in timings]
    decodes = [d for d in per_stream if d is not None]
    return LoadFigures(
        concurrency=concurrency,
        requests=len(exchanges),
        failed=len(exchanges) - len(ok),
        completion_tokens=tokens,
        window_s=window,
        aggregate_output_tok_s=tokens / window if (window and tokens) else None,
        decode_tok_s_median=median(decodes),
        decode_tok_s_p5=percentile(decodes, 5),
        decode_tok_s_p95=percentile(decodes, 95),
        per_stream_decode_tok_s=per_stream,
    )
