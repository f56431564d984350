"""Timestamps are taken when bytes arrive, never after JSON parsing, against a socket server."""

from __future__ import annotations

import asyncio
import itertools
import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

import qualify.httpclient.chat
from qualify.httpclient.chat import from_stream
from qualify.httpclient.client import Client, Exchange

BURSTS, PER_BURST, GAP_S = 4, 3, 0.05
HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"


def http_chunk(event: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(event), event)


def event(burst: int, i: int, t_send: float) -> bytes:
    body = {"choices": [{"index": 0, "delta": {"content": f"b{burst}e{i} "}}], "t_send": t_send}
    return b"data: " + json.dumps(body).encode() + b"\n\n"


def serve_one(listener: socket.socket) -> None:
    """Answer one request: BURSTS bursts, each PER_BURST events in one write, GAP_S apart."""
    conn, _ = listener.accept()
    with conn:
        conn.recv(65536)
        conn.sendall(HEAD)
        for b in range(BURSTS):
            time.sleep(GAP_S)
            t = time.monotonic()
            conn.sendall(b"".join(http_chunk(event(b, i, t)) for i in range(PER_BURST)))
        conn.sendall(http_chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")


@pytest.fixture
def server() -> Iterator[int]:
    listener = socket.create_server(("127.0.0.1", 0))
    thread = threading.Thread(target=serve_one, args=(listener,), daemon=True)
    thread.start()
    yield listener.getsockname()[1]
    thread.join(10)
    listener.close()


def slow_loads(s: str | bytes, **kw: Any) -> Any:
    time.sleep(0.02)  # far longer than a burst takes to read
    return json.JSONDecoder(**kw).decode(s if isinstance(s, str) else s.decode())


def stream(port: int) -> Exchange:
    async def go() -> Exchange:
        async with Client(f"http://127.0.0.1:{port}") as c:
            return await c.stream("/v1/chat/completions", {"stream": True})

    return asyncio.run(go())


def test_events_of_one_write_share_one_arrival_time(
    server: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With JSON parsing made slow, events written together still carry one arrival time."""
    monkeypatch.setattr(qualify.httpclient.chat, "json_loads", slow_loads)
    monkeypatch.setattr(json, "loads", slow_loads)
    ex = stream(server)
    assert ex.ok, ex.error
    data = ex.events[:-1]
    assert len(data) == BURSTS * PER_BURST and ex.events[-1].data == "[DONE]"
    for b in range(BURSTS):
        burst = data[b * PER_BURST : (b + 1) * PER_BURST]
        spread = burst[-1].t - burst[0].t
        assert spread < 0.005, f"burst {b} spread over {spread * 1000:.1f} ms"
    # Each burst is stamped at or after it was written (one clock, CLOCK_MONOTONIC), and
    # bursts written GAP_S apart are stamped at least nearly that far apart.
    for i in range(0, len(data), PER_BURST):
        t_send = slow_loads(data[i].data)["t_send"]
        assert ex.t_sent + data[i].t >= t_send
    firsts = [data[i].t for i in range(0, len(data), PER_BURST)]
    assert all(b - a > GAP_S * 0.8 for a, b in itertools.pairwise(firsts))


def test_outcome_times_are_arrival_times_not_parse_times(
    server: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """from_stream with a slow parser reports the recorded arrival times unchanged."""
    ex = stream(server)
    monkeypatch.setattr(qualify.httpclient.chat, "json_loads", slow_loads)
    out = from_stream(ex)
    assert out.t_first_output == ex.events[0].t
    assert out.t_last_token == ex.events[-2].t
    assert out.token_chunk_times == [e.t for e in ex.events[:-1]]


def test_what_is_judged_live_is_what_the_evidence_keeps(server: int) -> None:
    """The arrival times are taken to the microsecond the evidence keeps, so every figure of the
    live exchange equals, bit for bit, the figure derived again from its kept JSON form (a
    near-zero paired median cannot move between the run and `verify`)."""
    from qualify.evidence.kept import exchange_of
    from qualify.httpclient.timing import timing
    from qualify.redact import Redactor

    ex = stream(server)
    kept = json.loads(json.dumps(ex.evidence(Redactor())))
    again = exchange_of(kept, "the exchange")
    assert [e.t for e in again.events] == [e.t for e in ex.events]
    assert timing(from_stream(again)) == timing(from_stream(ex))
