"""The soak's liveness watch against real servers: a real llama-server that soaks cleanly, the
same server frozen with SIGSTOP mid-soak, and a local socket server that answers /health 200 but
never finishes a request. A hung engine is named as such, within the stated bound."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import start_llama_server

from qualify.capacity.knee import counts
from qualify.capacity.slo import Slo, SloSettings, effective
from qualify.capacity.soak import rss_mib, soak
from qualify.gates.thresholds import Thresholds
from qualify.httpclient.client import Client
from qualify.serving.dialects import dialect
from qualify.serving.local import LocalPaths
from qualify.serving.process import free_port
from qualify.serving.sender import Sender

pytestmark = pytest.mark.integration
MESSAGES = [{"role": "user", "content": "Describe how a lighthouse keeper spends a night."}]
STALL_S = 4.0


def _start(local_server: LocalPaths) -> tuple[subprocess.Popen[bytes], str]:
    return start_llama_server(local_server, "-c", "2048", "-np", "1", "-t", "2", "--metrics")


@pytest.fixture
def server(local_server: LocalPaths) -> Iterator[subprocess.Popen[bytes]]:
    proc, url = _start(local_server)
    proc.url = url  # type: ignore[attr-defined]
    try:
        yield proc
    finally:
        os.kill(proc.pid, signal.SIGCONT)
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _sender(c: Client, engine: str = "llama.cpp") -> Sender:
    body = {"model": "m", "max_tokens": 24, "temperature": 0}
    return Sender(c, dialect(engine), body, 60.0, 5.0, lambda label, ex: [])


async def _fresh() -> list[dict[str, str]]:
    return [dict(m) for m in MESSAGES]


def _counted(out: dict[str, Any], slo: Slo) -> dict[str, Any]:
    """The soak's record with its counts and goodput, as the rebuild derives them."""
    return out | counts(out["streams"], slo, out["window_s"])


def _soak(url: str, *, duration_s: float, rate: float, pid: int | None = None, **kw: Any) -> Any:
    slo = effective(Thresholds(), SloSettings(e2e_s=30.0))

    async def go() -> dict[str, Any]:
        async with Client(url) as c:
            return await soak(
                _sender(c),
                _fresh,
                rate_rps=rate,
                duration_s=duration_s,
                stall_s=15.0,
                kind="prose",
                max_tokens=24,
                slo=slo,
                lag_bound_ms=200.0,
                health_path="/health",
                seed=3,
                memory=(lambda: rss_mib(pid)),
                memory_source="server process RSS (/proc)",
                **kw,
            )

    return _counted(asyncio.run(go()), slo)


def test_a_healthy_engine_soaks_with_progress(server: Any) -> None:
    """A real llama-server under a steady 0.5 req/s: requests complete, the generated-token
    counter advances, the RSS is read, nothing is hung."""
    out = _soak(server.url, duration_s=12.0, rate=0.5, pid=server.pid)
    assert out["hung"] is None
    assert out["completed"] + out["cut"] == out["planned"] >= 2  # cut: at max_tokens
    assert out["progress"]["counter"] == "llamacpp:tokens_predicted_total"
    assert out["progress"]["generated_delta"] and out["progress"]["generated_delta"] > 0
    assert out["memory"]["start_mib"] and out["memory"]["growth_mib"] is not None
    assert out["health"] == {"HTTP 200": out["progress"]["scrapes"]}
    assert out["goodput"] is not None and out["timeline"]


def test_a_frozen_llama_server_is_a_hung_engine(server: Any) -> None:
    """SIGSTOP mid-soak: nothing answers, nothing completes; the soak stops and names a hung
    engine within stall + poll + two probe timeouts of the freeze."""

    async def freeze_later() -> None:
        await asyncio.sleep(3.0)
        os.kill(server.pid, signal.SIGSTOP)

    def run() -> tuple[dict[str, Any], float]:
        async def go() -> tuple[dict[str, Any], float]:
            slo = effective(Thresholds(), SloSettings(e2e_s=30.0))
            async with Client(server.url) as c:
                t = asyncio.create_task(freeze_later())
                t0 = time.perf_counter()
                out = await soak(
                    _sender(c),
                    _fresh,
                    rate_rps=1.0,
                    duration_s=60.0,
                    stall_s=STALL_S,
                    kind="prose",
                    max_tokens=24,
                    slo=slo,
                    lag_bound_ms=200.0,
                    health_path="/health",
                    seed=5,
                )
                await t
                return _counted(out, slo), time.perf_counter() - t0

        return asyncio.run(go())

    out, wall = run()
    assert out["hung"] and out["hung"].startswith("hung engine: no progress for")
    assert "no answer" in out["hung"]  # a stopped process does not answer /health either
    assert out["detected_after_s"] <= out["detection_bound_s"]
    assert wall < 3.0 + out["detection_bound_s"] + 5.0  # freeze, bound, teardown slack
    assert out["unfinished"] > 0


class HealthOnly:
    """A socket server that answers GET /health 200 and accepts a chat completion's request,
    sends the SSE headers, and then never sends anything more."""

    def __init__(self) -> None:
        self.port = free_port()
        self.held: list[asyncio.StreamWriter] = []
        self.server: asyncio.AbstractServer | None = None

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.held.append(writer)
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            await self._serve(reader, writer)
        writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            line = head.split(b"\r\n", 1)[0].decode()
            length = 0
            for h in head.split(b"\r\n")[1:]:
                if h.lower().startswith(b"content-length:"):
                    length = int(h.split(b":", 1)[1])
            if length:
                await reader.readexactly(length)
            if line.startswith("GET /health"):
                body = b'{"status":"ok"}'
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                    + f"content-length: {len(body)}\r\n\r\n".encode()
                    + body
                )
            elif line.startswith("POST"):
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                    b"transfer-encoding: chunked\r\n\r\n"
                )
                await writer.drain()
                await asyncio.Event().wait()  # never finishes
            else:
                writer.write(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")
            await writer.drain()

    async def __aenter__(self) -> str:
        self.server = await asyncio.start_server(self.handle, "127.0.0.1", self.port)
        return f"http://127.0.0.1:{self.port}"

    async def __aexit__(self, *exc: object) -> None:
        for w in self.held:
            w.close()
        assert self.server is not None
        self.server.close()
        await asyncio.sleep(0.1)  # let the handlers see their sockets close


def test_health_200_but_no_request_finishes_is_a_hung_engine() -> None:
    """/health answers 200 throughout, /metrics is absent, no request ever finishes: hung, with
    /health's 200s named, within the bound (the E2E SLO: without a progress counter only a
    finished request shows progress)."""

    async def go() -> tuple[dict[str, Any], float]:
        slo = effective(Thresholds(), SloSettings(e2e_s=6.0))
        async with HealthOnly() as url, Client(url) as c:
            t0 = time.perf_counter()
            out = await soak(
                _sender(c),
                _fresh,
                rate_rps=2.0,
                duration_s=60.0,
                stall_s=STALL_S,
                kind="prose",
                max_tokens=24,
                slo=slo,
                lag_bound_ms=200.0,
                health_path="/health",
                seed=7,
            )
            return _counted(out, slo), time.perf_counter() - t0

    out, wall = asyncio.run(go())
    assert out["hung"] and "no progress counter" in out["hung"]
    assert "HTTP 200" in out["hung"] and "no answer" not in out["hung"]
    assert out["completed"] == 0 and out["unfinished"] >= 1
    assert out["stall_bound_s"] == 6.0
    assert out["detected_after_s"] <= out["detection_bound_s"]
    assert wall < out["detection_bound_s"] + 3.0
