"""An httpcore network backend on plain asyncio protocols, for a light client footprint.

httpx's default backend reads through anyio, which re-registers the socket with the event loop
and opens a cancel scope on every read; on a small machine, where the client shares the cores
with the server it measures, that per-token work slows the server (see docs/performance.md).
Here the socket stays registered, arriving bytes are buffered by the protocol, and a read only
waits on a future, with one timer for its timeout. httpcore still speaks HTTP (h11) and keeps
the pool; httpx still maps errors. TLS goes through `loop.start_tls`.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterable
from typing import Any

import httpcore
import httpx

MAX_BUFFER = 1 << 20  # pause reading past this much unread data


class _Protocol(asyncio.Protocol):
    def __init__(self) -> None:
        self.chunks: list[bytes] = []
        self.size = 0
        self.eof = False
        self.paused = False
        self.error: BaseException | None = None
        self.waiter: asyncio.Future[None] | None = None
        self.drained: asyncio.Future[None] | None = None
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.chunks.append(data)
        self.size += len(data)
        if self.size > MAX_BUFFER and not self.paused and self.transport is not None:
            self.transport.pause_reading()
            self.paused = True
        self._wake()

    def eof_received(self) -> bool:
        self.eof = True
        self._wake()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.eof = True
        self.error = exc
        self._wake()
        if self.drained is not None and not self.drained.done():
            self.drained.set_result(None)

    def pause_writing(self) -> None:
        self.drained = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        if self.drained is not None and not self.drained.done():
            self.drained.set_result(None)
        self.drained = None

    def _wake(self) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)


def _expire(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_exception(TimeoutError())


class AsyncioStream(httpcore.AsyncNetworkStream):
    def __init__(self, transport: asyncio.Transport, protocol: _Protocol) -> None:
        self._transport = transport
        self._protocol = protocol

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        p = self._protocol
        if not p.chunks and not p.eof:
            loop = asyncio.get_running_loop()
            p.waiter = loop.create_future()
            timer = None if timeout is None else loop.call_later(timeout, _expire, p.waiter)
            try:
                await p.waiter
            except TimeoutError:
                raise httpcore.ReadTimeout(f"no data for {timeout} s") from None
            finally:
                p.waiter = None
                if timer is not None:
                    timer.cancel()
        if not p.chunks:
            if p.error is not None:
                raise httpcore.ReadError(str(p.error) or type(p.error).__name__)
            return b""
        data = p.chunks[0] if len(p.chunks) == 1 else b"".join(p.chunks)
        p.chunks.clear()
        if len(data) > max_bytes:
            data, rest = data[:max_bytes], data[max_bytes:]
            p.chunks.append(rest)
        p.size -= len(data)
        if p.paused and p.size <= MAX_BUFFER // 2:
            self._transport.resume_reading()
            p.paused = False
        return data

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if self._transport.is_closing():
            raise httpcore.WriteError("connection closed")
        self._transport.write(buffer)
        drained = self._protocol.drained
        if drained is not None:
            try:
                await asyncio.wait_for(asyncio.shield(drained), timeout)
            except TimeoutError:
                raise httpcore.WriteTimeout(f"write blocked for {timeout} s") from None

    async def aclose(self) -> None:
        self._transport.close()

    async def start_tls(
        self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        try:
            tls = await asyncio.wait_for(
                loop.start_tls(
                    self._transport, self._protocol, ssl_context, server_hostname=server_hostname
                ),
                timeout,
            )
        except TimeoutError:
            raise httpcore.ConnectTimeout(f"TLS handshake took over {timeout} s") from None
        except OSError as exc:
            raise httpcore.ConnectError(str(exc)) from exc
        if tls is None:
            raise httpcore.ConnectError("TLS could not be started")
        assert isinstance(tls, asyncio.Transport)
        self._protocol.transport = tls
        return AsyncioStream(tls, self._protocol)

    def get_extra_info(self, info: str) -> Any:
        if info == "is_readable":
            # An idle keep-alive connection with bytes or EOF pending was closed by the server.
            return bool(self._protocol.chunks) or self._protocol.eof
        if info == "ssl_object":
            return self._transport.get_extra_info("ssl_object")
        if info == "client_addr":
            return self._transport.get_extra_info("sockname")
        if info == "server_addr":
            return self._transport.get_extra_info("peername")
        if info == "socket":
            return self._transport.get_extra_info("socket")
        return None


class AsyncioBackend(httpcore.AsyncNetworkBackend):
    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        local = None if local_address is None else (local_address, 0)
        connect = loop.create_connection(_Protocol, host, port, local_addr=local)
        return await _connected(connect, timeout, socket_options)

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.AsyncNetworkStream:
        connect = asyncio.get_running_loop().create_unix_connection(_Protocol, path)
        return await _connected(connect, timeout, socket_options)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


async def _connected(
    connect: Any, timeout: float | None, socket_options: Iterable[Any] | None
) -> AsyncioStream:
    try:
        transport, protocol = await asyncio.wait_for(connect, timeout)
    except TimeoutError:
        raise httpcore.ConnectTimeout(f"no connection within {timeout} s") from None
    except OSError as exc:
        raise httpcore.ConnectError(str(exc) or type(exc).__name__) from exc
    sock: socket.socket | None = transport.get_extra_info("socket")
    for option in socket_options or ():
        if sock is not None:
            sock.setsockopt(*option)
    return AsyncioStream(transport, protocol)


def transport(limits: httpx.Limits) -> httpx.AsyncHTTPTransport:
    """httpx's own transport (TLS settings, error mapping), its pool on `AsyncioBackend`."""
    t = httpx.AsyncHTTPTransport(limits=limits)
    ssl_context = getattr(t._pool, "_ssl_context", None)
    t._pool = httpcore.AsyncConnectionPool(
        ssl_context=ssl_context,
        max_connections=limits.max_connections,
        max_keepalive_connections=limits.max_keepalive_connections,
        keepalive_expiry=limits.keepalive_expiry,
        network_backend=AsyncioBackend(),
    )
    return t
