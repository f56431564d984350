"""The client's figures against the real llama-server's own timings, and concurrent streams."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import start_llama_server

from qualify.httpclient.chat import from_stream
from qualify.httpclient.client import Client
from qualify.httpclient.load import drive
from qualify.httpclient.timing import fidelity, timing
from qualify.serving.local import LocalPaths

pytestmark = pytest.mark.integration
BODY: dict[str, Any] = {
    "messages": [{"role": "user", "content": "Tell me about lighthouses."}],
    "max_tokens": 48,
    "temperature": 0,
    "ignore_eos": True,
    "cache_prompt": False,
    "stream": True,
    "stream_options": {"include_usage": True},
}


def _start(local_server: LocalPaths) -> tuple[subprocess.Popen[bytes], str]:
    return start_llama_server(local_server, "-c", "4096", "-np", "2", "-t", "2")


@pytest.fixture(scope="module")
def server(local_server: LocalPaths) -> Iterator[str]:
    """A real llama-server with two slots, so two streams decode at once."""
    proc, url = _start(local_server)
    try:
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


async def warm(client: Client, concurrency: int) -> None:
    """Open `concurrency` keep-alive connections (concurrent GETs) before anything is timed."""
    await asyncio.gather(*(client.get("/health") for _ in range(concurrency)))


def test_client_figures_agree_with_server_timings(server: str) -> None:
    """At c=1 every request has server timings; TTFT is never below the server's prompt time,
    and the client's decode rate matches the server's definition (same tokens, same interval)."""

    async def go() -> list[Any]:
        async with Client(server) as c:
            await warm(c, 1)
            return [
                timing(from_stream(await c.stream("/v1/chat/completions", BODY))) for _ in "abc"
            ]

    ts = asyncio.run(go())
    assert [(t.completion_tokens, t.server_source) for t in ts] == [
        (48, "llama-server timings")
    ] * 3
    f = fidelity(ts)
    assert f["n"] == 3 and f["ttft_below_server_prompt"] == 0
    # One interval, two clocks: only the delivery jitter of two chunks separates them.
    assert f["decode_ratio_median"] == pytest.approx(1.0, abs=0.1)


def test_two_concurrent_streams_overlap_and_add_up(server: str) -> None:
    """drive(c=2) runs two streams at once; usage counts every token once."""

    async def go() -> list[Any]:
        async with Client(server) as c:
            await warm(c, 2)
            return await drive(c, [BODY] * 2, 2)

    exchanges = asyncio.run(go())
    assert all(ex.ok for ex in exchanges)
    a, b = ((ex.t_sent, ex.t_sent + (ex.t_end or 0)) for ex in exchanges)
    assert a[0] < b[1] and b[0] < a[1], "the two streams did not overlap"
    ts = [timing(from_stream(ex)) for ex in exchanges]
    assert sum(t.completion_tokens or 0 for t in ts) == 96
    assert all(t.decode_tok_s and t.server_decode_tok_s for t in ts)
