"""drive(): exactly c streams in flight, results in order."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import httpx
import pytest

from qualify.httpclient.client import Client, Exchange
from qualify.httpclient.load import drive

SSE = {"content-type": "text/event-stream"}


class Server:
    """A MockTransport handler that streams 5 tokens and records how many streams overlap."""

    def __init__(self) -> None:
        self.live = 0
        self.peak = 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        tag = json.loads(request.content)["tag"]
        return httpx.Response(200, headers=SSE, content=self.body(tag))

    async def body(self, tag: int) -> AsyncIterator[bytes]:
        self.live += 1
        self.peak = max(self.peak, self.live)
        try:
            for i in range(5):
                await asyncio.sleep(0.01)
                delta = {"content": f"{tag}:{i} "}
                yield b"data: " + json.dumps({"choices": [{"delta": delta}]}).encode() + b"\n\n"
            usage = {"prompt_tokens": 3, "completion_tokens": 5}
            end = {"choices": [{"delta": {}, "finish_reason": "length"}], "usage": usage}
            yield b"data: " + json.dumps(end).encode() + b"\n\ndata: [DONE]\n\n"
        finally:
            self.live -= 1


def run(server: Server, n: int, c: int) -> list[Exchange]:
    async def go() -> list[Exchange]:
        async with Client("http://test", transport=httpx.MockTransport(server)) as client:
            return await drive(client, [{"tag": i} for i in range(n)], c)

    return asyncio.run(go())


@pytest.mark.parametrize("c", [1, 2, 4, 6])
def test_drive_keeps_c_streams_in_flight(c: int) -> None:
    """With more bodies than c, exactly c streams overlap at the peak, never more."""
    server = Server()
    exchanges = run(server, 2 * c, c)
    assert server.peak == c
    assert [ex.request_body["tag"] for ex in exchanges] == list(range(2 * c))
    assert all(ex.ok for ex in exchanges)


def test_concurrency_below_one_is_refused() -> None:
    """A concurrency of 0 is a caller error, not an empty run."""
    with pytest.raises(ValueError, match="concurrency must be at least 1"):
        run(Server(), 1, 0)
