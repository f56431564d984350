"""The HTTP client: every exchange kept whole, every SSE event timestamped on arrival.

Timestamps come from the monotonic clock at the moment a network chunk is handed to us, before
any SSE decoding or JSON parsing, so parsing cost never shows up as latency. JSON is parsed later,
in `qualify.httpclient.chat`, from the recorded events.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import json
import time
from dataclasses import dataclass, field
from typing import Any

import httpx
from httpx_sse._decoders import SSEDecoder, SSELineDecoder

from qualify.redact import Redactor

now = time.perf_counter


@dataclass(slots=True)
class SSEEvent:
    """One server-sent event: arrival time (seconds after the request was sent), type, data."""

    t: float
    event: str
    data: str


@dataclass
class Exchange:
    """One HTTP exchange, as it will be kept in the evidence."""

    method: str
    url: str
    request_headers: dict[str, str]
    request_body: Any  # the JSON sent, or as kept evidence holds it: raw
    t_sent: float = 0.0
    status: int | None = None
    response_headers: dict[str, str] = field(default_factory=dict)
    body: Any = None  # the server's JSON answer, raw
    text: str | None = None
    events: list[SSEEvent] = field(default_factory=list)
    t_headers: float | None = None
    t_end: float | None = None
    error: str | None = None
    error_kind: str | None = None
    bytes_received: int = 0
    chunk_times: list[float] = field(default_factory=list)
    stale_retries: int = 0

    @property
    def ok(self) -> bool:
        return self.error is None and self.status is not None and 200 <= self.status < 300

    def evidence(self, redactor: Redactor) -> dict[str, object]:
        """The exchange as a JSON object, secrets redacted; SSE events kept raw."""
        return {
            "request": {
                "method": self.method,
                "url": self.url,
                "headers": redactor.headers(self.request_headers),
                "body": redactor.scrub(self.request_body),
            },
            "response": {
                "status": self.status,
                "headers": redactor.headers(self.response_headers),
                "body": redactor.scrub(self.body) if self.body is not None else None,
                "text": redactor.scrub_text(self.text) if self.text is not None else None,
                "sse": [[round(e.t, 6), e.event, redactor.scrub_text(e.data)] for e in self.events],
            },
            "timing": {
                "t_headers_s": self.t_headers,
                "t_end_s": self.t_end,
                "bytes": self.bytes_received,
                "network_chunks": len(self.chunk_times),
                "stale_retries": self.stale_retries,
            },
            "error": self.error,
            "error_kind": self.error_kind,
        }


def _classify(exc: BaseException) -> tuple[str, str]:
    if isinstance(exc, httpx.ConnectError):
        return "connect", f"connection failed: {exc or 'refused'}"
    if isinstance(exc, httpx.TimeoutException | TimeoutError):
        return "timeout", f"timed out: {type(exc).__name__} {exc}".strip()
    if isinstance(exc, httpx.RemoteProtocolError | httpx.ReadError):
        return "dropped", f"connection dropped mid-response: {exc or type(exc).__name__}"
    return "transport", f"{type(exc).__name__}: {exc}"


class Client:
    """An OpenAI-compatible client bound to one server (base URL and optional API key)."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        timeout_s: float = 120.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.timeout_s = timeout_s
        self._http = httpx.AsyncClient(
            base_url=self.base_url,
            headers={"Authorization": f"Bearer {api_key}"} if api_key else {},
            timeout=httpx.Timeout(timeout_s, connect=10.0),
            transport=transport,
            limits=httpx.Limits(max_connections=64, max_keepalive_connections=64),
        )
        self.redactor = Redactor()
        self.redactor.add(api_key)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def request(
        self, method: str, path: str, body: object = None, timeout_s: float | None = None
    ) -> Exchange:
        """A plain request; the body is parsed as JSON where it is JSON."""
        return await self._send(method, path, body, timeout_s, sse=False)

    async def get(self, path: str, timeout_s: float | None = None) -> Exchange:
        return await self.request("GET", path, None, timeout_s)

    async def post(self, path: str, body: object, timeout_s: float | None = None) -> Exchange:
        return await self.request("POST", path, body, timeout_s)

    async def stream(self, path: str, body: object, timeout_s: float | None = None) -> Exchange:
        """POST and read the answer as SSE, timestamping each network chunk as it arrives.

        `timeout_s` bounds the whole exchange; the client's read timeout bounds each gap, so a
        stalled stream ends as an `error` of kind `timeout` with what arrived so far kept.
        """
        return await self._send("POST", path, body, timeout_s, sse=True)

    async def _send(
        self, method: str, path: str, body: object, timeout_s: float | None, sse: bool
    ) -> Exchange:
        """The body is encoded before the clock starts, so a long prompt's JSON encoding is not
        counted as latency. A request that met a stale keep-alive connection (the server had
        closed it: llama-server does after every stream) is sent once more, timed afresh."""
        content = None if body is None and not sse else _encode(body)
        headers = STREAM_HEADERS if sse else None if content is None else JSON_HEADERS
        for retries in (0, 1):
            ex = Exchange(method, self.base_url + path, dict(self._http.headers), body)
            ex.stale_retries = retries
            t0 = ex.t_sent = now()
            stale = False
            try:
                async with (
                    asyncio.timeout(timeout_s or self.timeout_s),
                    self._http.stream(method, path, content=content, headers=headers) as resp,
                ):
                    if not sse:  # a plain answer is timed once read whole, a stream at its headers
                        await resp.aread()
                    ex.t_headers, ex.status = now() - t0, resp.status_code
                    ex.response_headers = dict(resp.headers)
                    kind = resp.headers.get("content-type", "")
                    if sse and resp.status_code < 400 and "event-stream" in kind:
                        await _read_sse(resp, ex, t0)
                    else:
                        _read_body(ex, await resp.aread(), sse)
            except (httpx.HTTPError, TimeoutError) as exc:
                ex.error_kind, ex.error = _classify(exc)
                # Stale: a connection the server had closed (FIN: httpcore's "without sending a
                # response"; RST: a read error) before one byte of the response came.
                said = str(exc) if isinstance(exc, httpx.RemoteProtocolError) else ""
                stale = isinstance(exc, httpx.ReadError) or "without sending a response" in said
            ex.t_end = now() - t0
            if not (stale and ex.status is None and ex.bytes_received == 0):
                break
        return ex


JSON_HEADERS = {"Content-Type": "application/json"}
STREAM_HEADERS = {"Accept": "text/event-stream", **JSON_HEADERS}


def _read_body(ex: Exchange, raw: bytes, sse: bool) -> None:
    """A whole answer: JSON where it is (a plain answer's blank body is none), else text."""
    ex.bytes_received = len(raw)
    ex.text = raw.decode("utf-8", errors="replace")
    with contextlib.suppress(ValueError):
        ex.body, ex.text = json.loads(ex.text) if sse or ex.text.strip() else None, None


def _encode(body: object) -> bytes:
    """JSON as httpx would send it (compact, UTF-8), done before any timing starts."""
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


async def _read_sse(resp: httpx.Response, ex: Exchange, t0: float) -> None:
    """Read an event stream into `ex`: one timestamp per piece of body, taken before decoding.

    Every event in a piece of body arrived at the same moment, so it gets that piece's time;
    UTF-8 and line decoding run in bulk per piece, and the per-line work is httpx-sse's SSE
    decoder, so the semantics (comments, multi-line data, `event:`, CR/LF) are the library's.
    A piece made only of whole one-line `data:` events, read with nothing pending, is split
    directly: what the decoder would yield for it, at a fraction of the cost per token.
    """
    lines = SSELineDecoder()
    decoder = SSEDecoder()
    text_of = codecs.getincrementaldecoder("utf-8")(errors="replace").decode
    events, stamps = ex.events, ex.chunk_times
    encoded = resp.headers.get("content-encoding", "identity") not in ("identity", "")
    pieces = resp.aiter_bytes() if encoded else resp.aiter_raw()
    size = 0
    clean = True  # no partial line buffered, no event half-decoded
    try:
        async for raw in pieces:
            # Kept to the microsecond: what is judged live is exactly what the evidence holds,
            # so a figure derived again from the kept exchange is the same figure.
            t = round(now() - t0, 6)
            stamps.append(t)
            size += len(raw)
            text = text_of(raw)
            datas = _whole_data_events(text) if clean else None
            if datas is not None:
                events.extend([SSEEvent(t, "message", d) for d in datas])
                continue
            for line in lines.decode(text):
                sse = decoder.decode(line)
                if sse is not None:
                    events.append(SSEEvent(t, sse.event, sse.data))
            clean = not lines.buffer and not lines.trailing_cr and text.endswith("\n\n")
    finally:
        ex.bytes_received = size
    tail = text_of(b"", True)  # an unfinished UTF-8 sequence at the very end
    for line in (lines.decode(tail) if tail else []) + lines.flush():
        sse = decoder.decode(line)
        if sse is not None:
            events.append(SSEEvent(round(now() - t0, 6), sse.event, sse.data))


def _whole_data_events(text: str) -> list[str] | None:
    """The data of `data: X\\n\\n` events making up all of `text`; None for anything else."""
    if not text.endswith("\n\n") or "\r" in text:
        return None
    blocks = text[:-2].split("\n\n")
    for b in blocks:
        if not b.startswith("data: ") or "\n" in b:
            return None
    return [b[6:] for b in blocks]


def error_message(body: object) -> tuple[str | None, str | None]:
    """The message and type of an error body: nested `{"error": {...}}` or flat."""
    if not isinstance(body, dict):
        return (str(body) if body else None), None
    err = body.get("error")
    if isinstance(err, dict):
        return err.get("message"), err.get("type")
    if isinstance(err, str):
        return err, body.get("type")
    return body.get("message") or body.get("detail"), body.get("type")
