"""A misbehaving server gives `error` or `fail` with a clear reason: never a crash or a pass."""

from __future__ import annotations

import httpx
from preflight_fakes import Broken, chat, delta, json_response, run, sse, stream_response

from qualify.records import Verdict

SSE = {"content-type": "text/event-stream"}


def test_malformed_sse_is_error() -> None:
    """Chunks that are not JSON make the stream unreadable: error, quoting the bad data."""
    body = sse(delta({"role": "assistant"}), "{not json", delta({}, finish="tool_calls"))
    result = run("streaming-tools", lambda r: stream_response(body))
    assert result.verdict is Verdict.ERROR
    assert "malformed stream" in result.reasons[0] and "{not json" in result.reasons[0]


def test_http_500_is_error() -> None:
    """An HTTP 500 is the server breaking: error, with its message."""
    result = run("smoke", lambda r: json_response({"error": {"message": "CUDA oops"}}, 500))
    assert result.verdict is Verdict.ERROR
    assert result.reasons == ["smoke request: server error HTTP 500: CUDA oops"]


def test_http_500_on_stream_is_error() -> None:
    """The same on a streamed request (a JSON error body instead of an event stream)."""
    result = run("streaming-tools", lambda r: json_response({"message": "overloaded"}, 503))
    assert result.verdict is Verdict.ERROR
    assert "server error HTTP 503: overloaded" in result.reasons[0]


def test_stall_past_timeout_is_error() -> None:
    """A stream that stalls past the request timeout ends as a timeout error."""
    first = sse(delta({"role": "assistant"}), done=False)
    result = run(
        "streaming-tools",
        lambda r: httpx.Response(200, headers=SSE, stream=Broken(first, stall_s=5.0)),
        timeout_s=0.3,
    )
    assert result.verdict is Verdict.ERROR
    assert "timed out" in result.reasons[0]


def test_stall_on_plain_request_is_error() -> None:
    """A non-streamed request that never answers in time is a timeout error."""

    async def slow(request: httpx.Request) -> httpx.Response:
        import asyncio

        await asyncio.sleep(5)
        return json_response(chat("late"))

    result = run("smoke", slow, timeout_s=0.3)
    assert result.verdict is Verdict.ERROR
    assert "timed out" in result.reasons[0]


def test_stream_dropped_mid_tool_call_is_error() -> None:
    """A connection dropped in the middle of a tool call's arguments: error, not a pass."""
    first = sse(
        delta(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "book_table", "arguments": '{"restau'},
                    }
                ]
            }
        ),
        done=False,
    )
    result = run(
        "streaming-tools", lambda r: httpx.Response(200, headers=SSE, stream=Broken(first))
    )
    assert result.verdict is Verdict.ERROR
    assert "connection dropped" in result.reasons[0]


def test_stream_without_done_is_error() -> None:
    """A stream that closes cleanly but without [DONE] may be cut short: error."""
    args = '{"restaurant": "X", "party_size": 2, "contact": {"name": "A", "phone": "555"}}'
    body = sse(
        delta(
            {
                "tool_calls": [
                    {"index": 0, "id": "c1", "function": {"name": "book_table", "arguments": args}}
                ]
            }
        ),
        delta({}, finish="tool_calls"),
        done=False,
    )
    result = run("streaming-tools", lambda r: stream_response(body))
    assert result.verdict is Verdict.ERROR
    assert "without its final [DONE]" in result.reasons[0]


def test_refused_connection_is_error_and_stops_attempts() -> None:
    """Connection refused is error; the remaining attempts are not run, and that is said."""

    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    result = run("typed-tools", refuse)
    assert result.verdict is Verdict.ERROR
    assert len(result.attempts) == 1
    assert "connection failed" in result.reasons[0]
    assert result.reasons[-1] == "attempts 2-3 not run after an error"


def test_error_chunk_mid_stream_fails() -> None:
    """An error event inside a 200 stream is the server refusing: fail, with its message."""
    body = sse({"error": {"message": "grammar failed", "type": "server_error"}})
    result = run("streaming-tools", lambda r: stream_response(body))
    assert result.verdict is Verdict.FAIL
    assert "grammar failed" in result.reasons[0]


def test_check_bug_is_error_not_crash() -> None:
    """A body that breaks a check's assumptions becomes an `error`, never an exception."""
    result = run("smoke", lambda r: json_response({"choices": "nonsense"}))
    assert result.verdict in (Verdict.ERROR, Verdict.FAIL)
    assert result.reasons
