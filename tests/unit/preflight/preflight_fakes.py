"""Fake servers for preflight checks: answers in the shapes vLLM, SGLang and llama-server use."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx

from qualify.gates.files import LoadedGate, load_gates
from qualify.gates.probe import GateContext
from qualify.gates.runner import run_gate
from qualify.httpclient.client import Client
from qualify.preflight.stage import DEFAULT_GATES
from qualify.records import GateResult

Handler = Callable[[httpx.Request], httpx.Response]


def gate(gate_id: str) -> LoadedGate:
    """A gate file from the project's `gates/` directory, as the stage loads it."""
    gates, problems = load_gates(DEFAULT_GATES)
    assert not problems, problems
    return next(g for g in gates if g.gate.id == gate_id)


def body_of(request: httpx.Request) -> dict[str, Any]:
    return json.loads(request.content)  # type: ignore[no-any-return]


def chat(
    content: str = "",
    reasoning: str | None = None,
    field: str = "reasoning_content",
    tool_calls: list[dict[str, Any]] | None = None,
    finish: str = "stop",
    tokens: int = 9,
) -> dict[str, Any]:
    """A non-streamed chat completion; `field` is `reasoning` (vLLM) or `reasoning_content`."""
    msg: dict[str, Any] = {"role": "assistant", "content": content}
    if reasoning is not None:
        msg[field] = reasoning
    if tool_calls is not None:
        msg["tool_calls"] = tool_calls
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": msg, "finish_reason": finish}],
        "usage": {"prompt_tokens": 20, "completion_tokens": tokens, "total_tokens": 20 + tokens},
    }


def call(name: str, arguments: dict[str, Any] | str, call_id: str = "call_1") -> dict[str, Any]:
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}


def sse(*events: Any, done: bool = True) -> bytes:
    """`data:` lines; a dict is JSON-encoded, a str is sent as it is (to send malformed data)."""
    lines = [f"data: {e if isinstance(e, str) else json.dumps(e)}\n\n" for e in events]
    if done:
        lines.append("data: [DONE]\n\n")
    return "".join(lines).encode()


def named_sse(events: list[dict[str, Any]]) -> bytes:
    """Responses API frames: an `event:` line, then the JSON payload."""
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()


def delta(d: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": d, "finish_reason": finish}],
    }


def usage_chunk(tokens: int) -> dict[str, Any]:
    return {"choices": [], "usage": {"prompt_tokens": 20, "completion_tokens": tokens}}


def stream_response(data: bytes) -> httpx.Response:
    """An SSE response whose body arrives as one network chunk."""

    async def body() -> AsyncIterator[bytes]:
        yield data

    return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body())


def json_response(obj: Any, status: int = 200) -> httpx.Response:
    return httpx.Response(status, json=obj)


class Broken(httpx.AsyncByteStream):
    """A stream that sends `first`, then drops the connection or stalls."""

    def __init__(self, first: bytes, stall_s: float | None = None) -> None:
        self.first, self.stall_s = first, stall_s

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield self.first
        if self.stall_s is not None:
            await asyncio.sleep(self.stall_s)
            yield b""
        raise httpx.RemoteProtocolError("peer closed connection without sending complete message")


def context(
    handler: Handler,
    level_fields: dict[str, Any] | None = None,
    timeout_s: float = 5.0,
    reasoning_tokens: int = 0,
) -> tuple[GateContext, list[dict[str, Any]]]:
    """A gate context on a MockTransport; returns it and the list of kept exchanges."""
    kept: list[dict[str, Any]] = []

    def keep(label: str, ex: Any) -> list[str]:
        kept.append({"label": label, "request": ex.request_body, "status": ex.status})
        return [f"{len(kept):04d}-{label}.json"]

    client = Client("http://mock", transport=httpx.MockTransport(handler), timeout_s=timeout_s)
    ctx = GateContext(
        client=client,
        keep=keep,
        write=lambda name, obj: [name],
        model="m",
        level="test",
        fields=level_fields or {},
        gates_dir=DEFAULT_GATES,
        max_tokens=64,
        timeout_s=timeout_s,
        window=8192,
        reasoning_tokens=reasoning_tokens,
        reasoning_source="the test",
    )
    return ctx, kept


def run(gate_id: str, handler: Handler, **kw: Any) -> GateResult:
    """Run one real gate file against a fake server."""
    ctx, _ = context(handler, **kw)

    async def go() -> GateResult:
        try:
            return await run_gate(gate(gate_id), ctx)
        finally:
            await ctx.client.aclose()

    return asyncio.run(go())
