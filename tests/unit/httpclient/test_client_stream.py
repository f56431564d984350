"""Client.stream and from_stream: SSE semantics, and token counts that come from usage only."""

from __future__ import annotations

import asyncio
import gzip
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from qualify.httpclient.chat import from_stream
from qualify.httpclient.client import Client, Exchange
from qualify.httpclient.timing import timing

SSE = {"content-type": "text/event-stream"}


def chunk(content: str | None = None, finish: str | None = None, **extra: Any) -> bytes:
    delta = {} if content is None else {"content": content}
    body = {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra}
    return b"data: " + json.dumps(body).encode() + b"\n\n"


def paced(pieces: list[bytes], gap_s: float = 0.0) -> Callable[[httpx.Request], httpx.Response]:
    """A handler streaming `pieces` as separate body parts, `gap_s` apart."""

    async def body() -> AsyncIterator[bytes]:
        for p in pieces:
            if gap_s:
                await asyncio.sleep(gap_s)
            yield p

    return lambda request: httpx.Response(200, headers=SSE, content=body())


def run_stream(handler: Callable[[httpx.Request], httpx.Response]) -> Exchange:
    async def go() -> Exchange:
        async with Client("http://test", transport=httpx.MockTransport(handler)) as c:
            return await c.stream("/v1/chat/completions", {"stream": True})

    return asyncio.run(go())


USAGE = {"usage": {"prompt_tokens": 7, "completion_tokens": 15}}


def test_tokens_come_from_usage_not_chunks() -> None:
    """Five chunks carrying fifteen tokens (usage says 15) decode at 14 tokens per interval."""
    pieces = [chunk("one two three") for _ in range(5)]
    pieces += [chunk(None, "length"), b"data: " + json.dumps({"choices": [], **USAGE}).encode()]
    pieces += [b"\n\ndata: [DONE]\n\n"]
    out = from_stream(run_stream(paced(pieces, 0.01)))
    t = timing(out)
    assert t.completion_tokens == 15 and t.token_chunks == 5
    assert t.chunks_per_token == pytest.approx(5 / 15)
    assert out.t_first_output is not None and out.t_last_token is not None
    assert t.decode_tok_s == pytest.approx(14 / (out.t_last_token - out.t_first_output))
    assert t.decode_tok_s != pytest.approx(4 / (out.t_last_token - out.t_first_output))


def test_no_usage_means_no_token_figures() -> None:
    """Without usage there is no token count and no decode rate: chunks are never counted."""
    pieces = [chunk("a b") for _ in range(4)] + [chunk(None, "stop"), b"data: [DONE]\n\n"]
    t = timing(from_stream(run_stream(paced(pieces, 0.005))))
    assert t.token_chunks == 4
    assert t.completion_tokens is None and t.decode_tok_s is None and t.itl_p50_ms is None


def test_stop_token_ends_generation_at_the_finish_chunk() -> None:
    """A stop (EOS) is counted in usage; generation ends at the finish chunk that follows it."""
    pieces = [chunk("x") for _ in range(3)] + [chunk(None, "stop", **USAGE), b"data: [DONE]\n\n"]
    out = from_stream(run_stream(paced(pieces, 0.01)))
    assert out.t_finish is not None and out.t_last_token is not None
    assert out.t_finish > out.t_last_token
    t = timing(out)
    assert t.generation_s == pytest.approx(out.t_finish - (out.t_first_output or 0.0))


def test_length_stop_ends_generation_at_the_last_token() -> None:
    """A `length` stop has no stop token: generation ends at the last token-bearing chunk."""
    pieces = [chunk("x") for _ in range(3)] + [chunk(None, "length", **USAGE)]
    out = from_stream(run_stream(paced(pieces, 0.01)))
    t = timing(out)
    assert t.generation_s == pytest.approx((out.t_last_token or 0) - (out.t_first_output or 0))


def test_sse_split_anywhere_decodes_the_same() -> None:
    """Events split mid-line, mid-UTF-8 character and between CR and LF decode unchanged."""
    text = (
        ': a comment\r\nevent: delta\r\ndata: {"v": "héllo 🌍"}\r\n\r\n'
        "data: line one\ndata: line two\n\nid: 3\rdata: last\r\r"
    ).encode()
    whole = run_stream(paced([text]))
    for cut in range(1, len(text)):
        split = run_stream(paced([text[:cut], text[cut:]]))
        assert [(e.event, e.data) for e in split.events] == [
            (e.event, e.data) for e in whole.events
        ], cut
    assert [(e.event, e.data) for e in whole.events] == [
        ("delta", '{"v": "héllo 🌍"}'),
        ("message", "line one\nline two"),
        ("message", "last"),
    ]
    assert whole.bytes_received == len(text)


def test_unterminated_last_event_is_kept() -> None:
    """An event cut off before its blank line is dropped (as SSE says); those before it stay."""
    ex = run_stream(paced([b"data: one\n\ndata: two"]))
    assert [e.data for e in ex.events] == ["one"]  # SSE: an event needs its blank line
    ex = run_stream(paced([b"data: one\n\ndata: two\n"]))
    assert [e.data for e in ex.events] == ["one"]


def test_gzip_encoded_stream_is_decoded() -> None:
    """A content-encoded event stream is read through the decoder, not as raw bytes."""
    raw = gzip.compress(chunk("hi") + b"data: [DONE]\n\n")

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={**SSE, "content-encoding": "gzip"}, content=raw)

    out = from_stream(run_stream(handler))
    assert out.content == "hi" and out.done


def test_every_event_carries_its_network_piece_time() -> None:
    """Each event's time is the arrival time of the body piece that completed it."""
    pieces = [chunk("a") + chunk("b"), chunk("c"), b"data: [DO", b"NE]\n\n"]
    ex = run_stream(paced(pieces, 0.005))
    assert len(ex.chunk_times) == 4
    assert [e.t for e in ex.events] == [ex.chunk_times[i] for i in (0, 0, 1, 3)]


def reference(text: str) -> list[tuple[str, str]]:
    """httpx-sse's own decoding of a whole stream."""
    from httpx_sse._decoders import SSEDecoder, SSELineDecoder

    lines, decoder, out = SSELineDecoder(), SSEDecoder(), []
    for line in [*lines.decode(text), *lines.flush()]:
        sse = decoder.decode(line)
        if sse is not None:
            out.append((sse.event, sse.data))
    return out


@pytest.mark.parametrize(
    "pieces",
    [
        ["data: a\n\n", "data: b\n\ndata: c\n\n", "data:  two spaces\n\n", "data: \n\n"],
        ["data:nospace\n\n", "data: x\n\n"],
        ["event: e\n", "data: a\n\n", "data: b\n\n"],
        ["data: a\n", "data: b\n\n", "data: c\n\n"],
        ["data: a", "\n\n", "data: b\n\n"],
        [": keepalive\n\n", "data: a\n\n", "retry: 5\n\n", "data: b\n\n"],
        ["data: a\r\n\r\n", "data: b\n\n", "data: c\r", "\n\r\ndata: d\n\n"],
    ],
)
def test_whole_data_pieces_decode_as_httpx_sse_does(pieces: list[str]) -> None:
    """Pieces of whole `data:` events, and every mix around them, decode as httpx-sse does."""
    ex = run_stream(paced([p.encode() for p in pieces]))
    assert [(e.event, e.data) for e in ex.events] == reference("".join(pieces))
