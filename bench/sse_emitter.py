"""A local SSE emitter for benchmarking the client: as fast as it can, or on a fixed schedule.

Run it in its own process (`python bench/sse_emitter.py --port 18510`) so that its CPU time is
not counted against the client. Each POST body is JSON `{"n": events, "interval_s": seconds,
"pad": bytes}`: `interval_s = 0` streams as fast as the socket takes it, otherwise event i is
due at `start + i * interval_s`. Every event is its own HTTP chunk (chunked transfer encoding,
as llama-server, vLLM and uvicorn send them) and carries, in `t_send`, the monotonic time at
which it was written, so a client in another process can measure its timestamp error: both
read CLOCK_MONOTONIC.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import time

HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
    b"transfer-encoding: chunked\r\ncache-control: no-cache\r\n\r\n"
)
# Shaped like a llama-server chat chunk, so the byte count per event is realistic (~280 B).
TEMPLATE = (
    '{"choices":[{"finish_reason":null,"index":0,"delta":{"content":" tok"}}],'
    '"created":1796236596,"id":"chatcmpl-bench","model":"bench","pad":"%s",'
    '"object":"chat.completion.chunk","i":%d,"t_send":%.7f}'
)
BATCH = 32  # events per write in the as-fast-as-possible mode


def chunk(payload: bytes) -> bytes:
    """One HTTP/1.1 chunk holding one SSE event."""
    event = b"data: " + payload + b"\n\n"
    return b"%x\r\n%s\r\n" % (len(event), event)


async def read_request(reader: asyncio.StreamReader) -> dict[str, float] | None:
    """The JSON body of the next request on a keep-alive connection; None at EOF."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    length = 0
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    body = await reader.readexactly(length) if length else b"{}"
    parsed: dict[str, float] = json.loads(body or b"{}")
    return parsed


async def stream(writer: asyncio.StreamWriter, spec: dict[str, float]) -> None:
    n, interval, pad = (
        int(spec.get("n", 1000)),
        float(spec.get("interval_s", 0.0)),
        "x" * int(spec.get("pad", 40)),
    )
    writer.write(HEAD)
    start = time.monotonic()
    i = 0
    while i < n:
        if interval > 0:
            delay = start + i * interval - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            k = 1
        else:
            k = min(BATCH, n - i)
        t = time.monotonic()
        writer.write(b"".join(chunk((TEMPLATE % (pad, j, t)).encode()) for j in range(i, i + k)))
        i += k
        await writer.drain()
    writer.write(chunk(b"[DONE]") + b"0\r\n\r\n")
    await writer.drain()


async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(ConnectionError):
        while (spec := await read_request(reader)) is not None:
            await stream(writer, spec)
    writer.close()


async def main(port: int) -> None:
    server = await asyncio.start_server(serve, "127.0.0.1", port, backlog=256)
    print(f"listening on 127.0.0.1:{port}", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=18510)
    asyncio.run(main(ap.parse_args().port))
