"""Connections: keep-alive reuse, stale retries, timeouts, against local socket servers."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Callable, Iterator

import pytest

from qualify.httpclient.client import Client, Exchange

OK = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}"


def read_request(conn: socket.socket) -> None:
    """Read one whole request (head and body), so that closing afterwards is a clean FIN."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += conn.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    while len(body) < length:
        body += conn.recv(65536)


@pytest.fixture
def serve() -> Iterator[Callable[[Callable[[socket.socket], None]], int]]:
    """Run `handler(conn)` for each connection to a local port, in a thread."""
    listeners: list[socket.socket] = []

    def start(handler: Callable[[socket.socket], None]) -> int:
        listener = socket.create_server(("127.0.0.1", 0))
        listeners.append(listener)

        def loop() -> None:
            while True:
                try:
                    conn, _ = listener.accept()
                except OSError:
                    return
                with conn:
                    handler(conn)

        threading.Thread(target=loop, daemon=True).start()
        return int(listener.getsockname()[1])

    yield start
    for listener in listeners:
        listener.close()


def get_twice(port: int, timeout_s: float = 5.0) -> list[Exchange]:
    async def go() -> list[Exchange]:
        async with Client(f"http://127.0.0.1:{port}", timeout_s=timeout_s) as c:
            first = await c.get("/a")
            await asyncio.sleep(0.05)
            return [first, await c.get("/b")]

    return asyncio.run(go())


def test_keep_alive_connection_is_reused(serve) -> None:  # type: ignore[no-untyped-def]
    """Two requests travel on one connection when the server keeps it open."""
    accepted: list[int] = []

    def handler(conn: socket.socket) -> None:
        accepted.append(1)
        for _ in range(2):
            read_request(conn)
            conn.sendall(OK)

    a, b = get_twice(serve(handler))
    assert a.ok and b.ok and a.body == {} and len(accepted) == 1
    assert a.stale_retries == b.stale_retries == 0


def test_connection_closed_after_response_is_not_reused(serve) -> None:  # type: ignore[no-untyped-def]
    """A server that closes after each response (as llama-server does after a stream) costs
    no failed request: the closed connection is noticed and a new one opened."""

    def handler(conn: socket.socket) -> None:
        read_request(conn)
        conn.sendall(OK)

    a, b = get_twice(serve(handler))
    assert a.ok and b.ok, (a.error, b.error)


def test_request_on_a_stale_connection_is_sent_once_more(serve) -> None:  # type: ignore[no-untyped-def]
    """A connection closed just as the next request left it (no response byte) is retried
    once on a fresh connection, and the retry is recorded."""
    calls: list[int] = []

    def handler(conn: socket.socket) -> None:
        calls.append(1)
        read_request(conn)
        conn.sendall(OK)
        if len(calls) == 1:
            read_request(conn)  # the second request, on this kept-alive connection...
            # ...closed unanswered, as a keep-alive timing out at that instant would be

    a, b = get_twice(serve(handler))
    assert a.ok and b.ok, (a.error, b.error)
    assert b.stale_retries == 1 and len(calls) == 2


def test_server_that_never_answers_is_dropped_not_retried_forever(serve) -> None:  # type: ignore[no-untyped-def]
    """A server that closes every connection unanswered yields one `dropped` error."""
    calls: list[int] = []

    def handler(conn: socket.socket) -> None:
        calls.append(1)
        read_request(conn)

    async def go() -> Exchange:
        async with Client(f"http://127.0.0.1:{port}") as c:
            return await c.stream("/v1/chat/completions", {"stream": True})

    port = serve(handler)
    ex = asyncio.run(go())
    assert ex.error_kind == "dropped" and ex.stale_retries == 1 and len(calls) == 2


def test_stalled_stream_times_out_with_what_arrived(serve) -> None:  # type: ignore[no-untyped-def]
    """A stream that stops sending ends as a `timeout` error, the events so far kept."""
    stop = threading.Event()

    def handler(conn: socket.socket) -> None:
        read_request(conn)
        head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
        conn.sendall(head + b"transfer-encoding: chunked\r\n\r\n" + b"d\r\ndata: one\n\n\r\n")
        stop.wait(5)

    async def go() -> Exchange:
        async with Client(f"http://127.0.0.1:{port}", timeout_s=0.3) as c:
            return await c.stream("/v1/chat/completions", {"stream": True})

    port = serve(handler)
    ex = asyncio.run(go())
    stop.set()
    assert ex.error_kind == "timeout" and [e.data for e in ex.events] == ["one"]


def test_refused_connection_is_a_connect_error() -> None:
    """Nothing listening: a `connect` error, not a crash."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, never listening: connections are refused

        async def go() -> Exchange:
            async with Client(f"http://127.0.0.1:{port}") as c:
                return await c.get("/health")

        ex = asyncio.run(go())
    assert ex.error_kind == "connect" and not ex.ok
