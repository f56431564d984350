"""Driving c concurrent streams.

`drive` keeps exactly `concurrency` streams in flight (closed loop: a stream that ends is
replaced by the next body) on one event loop, with no extra threads or processes, so the client
adds no CPU contention of its own beyond reading.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from qualify.httpclient.client import Client, Exchange

Messages = list[dict[str, str]]
Keep = Callable[[str, Exchange], list[str]]

CHAT = "/v1/chat/completions"


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
