"""Reading chat completions, streamed or not, into one outcome with its timings.

Reasoning and visible content are kept apart (`reasoning` in vLLM, `reasoning_content` in
SGLang and llama-server). Tool-call deltas are joined by index, id and argument fragments.
Tokens are counted from `usage` only: SSE chunks are recorded, never counted as tokens.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from qualify.httpclient.client import Exchange, error_message
from qualify.serving.engines import REASONING_FIELDS

json_loads = json.loads


@dataclass
class ToolCall:
    index: int
    id: str | None = None
    name: str | None = None
    arguments: str = ""

    def parsed_arguments(self) -> tuple[Any, str | None]:
        try:
            return json.loads(self.arguments or "{}"), None
        except ValueError as exc:
            return None, f"arguments are not JSON ({exc}): {self.arguments[:120]!r}"

    def as_dict(self) -> dict[str, Any]:
        return {"index": self.index, "id": self.id, "name": self.name, "arguments": self.arguments}


@dataclass
class ChatOutcome:
    """What a chat completion said, and when each part of it arrived."""

    content: str = ""
    reasoning: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    timings: dict[str, Any] | None = None
    server_metrics: dict[str, Any] | None = None
    chunks: int = 0
    done: bool = False
    malformed: list[str] = field(default_factory=list)
    stream_error: str | None = None
    t_first_output: float | None = None
    t_first_visible: float | None = None
    t_last_token: float | None = None
    t_finish: float | None = None
    t_end: float | None = None
    token_chunk_times: list[float] = field(default_factory=list)
    http_status: int | None = None
    error: str | None = None
    error_type: str | None = None
    error_kind: str | None = None
    raw_body: Any = None

    @property
    def completion_tokens(self) -> int | None:
        if self.usage and isinstance(self.usage.get("completion_tokens"), int):
            return int(self.usage["completion_tokens"])
        return None

    @property
    def prompt_tokens(self) -> int | None:
        if self.usage and isinstance(self.usage.get("prompt_tokens"), int):
            return int(self.usage["prompt_tokens"])
        return None

    @property
    def cached_tokens(self) -> int | None:
        details = (self.usage or {}).get("prompt_tokens_details") or {}
        if isinstance(details.get("cached_tokens"), int):
            return int(details["cached_tokens"])
        if self.timings and isinstance(self.timings.get("cache_n"), int):
            return int(self.timings["cache_n"])
        return None


def _reasoning_of(obj: dict[str, Any]) -> str:
    """The first reasoning field holding text: vLLM 0.11-0.2x send both, with the same text."""
    for key in REASONING_FIELDS:
        value = obj.get(key)
        if isinstance(value, str) and value:
            return value
    return ""


def _merge_tool_delta(calls: dict[int, ToolCall], delta: dict[str, Any]) -> None:
    idx = delta.get("index")
    if not isinstance(idx, int):
        idx = (
            len(calls)
            if delta.get("id") and delta.get("id") not in [c.id for c in calls.values()]
            else max(calls, default=0)
        )
    call = calls.setdefault(idx, ToolCall(index=idx))
    if delta.get("id"):
        call.id = delta["id"]
    fn = delta.get("function") or {}
    if fn.get("name"):
        call.name = fn["name"]
    if isinstance(fn.get("arguments"), str):
        call.arguments += fn["arguments"]


def from_stream(ex: Exchange) -> ChatOutcome:
    """Join the recorded SSE events of a streamed chat completion."""
    out = _base(ex)
    if not ex.events and ex.body is not None:
        return _fill_error(out, ex)
    calls: dict[int, ToolCall] = {}
    for ev in ex.events:
        if ev.data.strip() == "[DONE]":
            out.done = True
            continue
        out.chunks += 1
        try:
            chunk = json_loads(ev.data)
        except ValueError:
            out.malformed.append(ev.data[:200])
            continue
        if not isinstance(chunk, dict):
            out.malformed.append(ev.data[:200])
            continue
        if "error" in chunk:
            out.error, out.error_type = error_message(chunk)
            continue
        if isinstance(chunk.get("usage"), dict):
            out.usage = chunk["usage"]
        if isinstance(chunk.get("timings"), dict):
            out.timings = chunk["timings"]
        if isinstance(chunk.get("metrics"), dict):
            out.server_metrics = chunk["metrics"]
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            got_token = False
            reasoning = _reasoning_of(delta)
            if reasoning:
                out.reasoning += reasoning
                got_token = True
            content = delta.get("content")
            if isinstance(content, str) and content:
                out.content += content
                got_token = True
                if out.t_first_visible is None:
                    out.t_first_visible = ev.t
            for tc in delta.get("tool_calls") or []:
                _merge_tool_delta(calls, tc)
                got_token = True
                if out.t_first_visible is None:
                    out.t_first_visible = ev.t
            if got_token:
                if out.t_first_output is None:
                    out.t_first_output = ev.t
                out.t_last_token = ev.t
                out.token_chunk_times.append(ev.t)
            if choice.get("finish_reason"):
                out.finish_reason = choice["finish_reason"]
                if out.t_finish is None:
                    out.t_finish = ev.t
    out.tool_calls = [calls[i] for i in sorted(calls)]
    return out


def from_response(ex: Exchange) -> ChatOutcome:
    """Read a non-streamed chat completion."""
    out = _base(ex)
    body = ex.body
    if not ex.ok or not isinstance(body, dict) or "choices" not in body:
        return _fill_error(out, ex)
    choice = (body.get("choices") or [{}])[0]
    msg = choice.get("message") or {}
    out.content = msg.get("content") or ""
    out.reasoning = _reasoning_of(msg)
    for i, tc in enumerate(msg.get("tool_calls") or []):
        fn = tc.get("function") or {}
        args = fn.get("arguments")
        out.tool_calls.append(
            ToolCall(
                index=i,
                id=tc.get("id"),
                name=fn.get("name"),
                arguments=args if isinstance(args, str) else json.dumps(args),
            )
        )
    out.finish_reason = choice.get("finish_reason")
    out.usage = body.get("usage")
    out.timings = body.get("timings")
    if isinstance(body.get("metrics"), dict):
        out.server_metrics = body["metrics"]
    return out


def _base(ex: Exchange) -> ChatOutcome:
    out = ChatOutcome(http_status=ex.status, t_end=ex.t_end, raw_body=ex.body)
    out.stream_error = ex.error
    out.error_kind = ex.error_kind
    if ex.error:
        out.error = ex.error
    return out


def _fill_error(out: ChatOutcome, ex: Exchange) -> ChatOutcome:
    if ex.error:
        return out
    msg, typ = error_message(ex.body if ex.body is not None else ex.text)
    out.error = msg or f"HTTP {ex.status} with no usable body"
    out.error_type = typ
    return out
