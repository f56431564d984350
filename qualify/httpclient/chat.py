"""Reading chat completions, streamed or not, into one outcome with its timings.

Reasoning and visible content are kept apart (`reasoning` in vLLM, `reasoning_content` in
SGLang and llama-server). Tool-call deltas are joined by index, id and argument fragments.
Tokens are counted from `usage` only: SSE chunks are recorded, never counted as tokens.

The client knows no engine: how one words an answer reaches it as data, the `Quirks` the caller
passes (`qualify.serving.engine.adapter(name).quirks`); without one (`ANY_ENGINE`), every
engine's reasoning fields are read and an error body for its message, type and parameter only.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from qualify.httpclient.client import Exchange, error_message

json_loads = json.loads

# Every field a chat message or delta may carry reasoning in, across the engines.
REASONING_FIELDS = ("reasoning", "reasoning_content")


@dataclass(frozen=True)
class ServerError:
    """An error body, read: nested `{"error": {...}}` (vLLM since 0.10.1, llama-server) or flat
    (SGLang). `kind` is `over-length` (the prompt alone is over the window), `over-request`
    (prompt plus max_tokens is), or None (another error)."""

    message: str
    type: str | None
    param: str | None
    shape: str  # "nested" | "flat"
    kind: str | None = None
    limit: int | None = None
    prompt_tokens: int | None = None


@dataclass(frozen=True)
class Quirks:
    """How one engine words what the client reads, as data."""

    # The fields a message or delta carries reasoning in (the first holding text is read).
    reasoning_fields: tuple[str, ...] = REASONING_FIELDS
    # (kind, pattern) pairs, each pattern with the named groups `limit` and `prompt`, as the
    # engine words an over-length or over-request error.
    length_errors: tuple[tuple[str, str], ...] = ()
    # The error's own fields for the window and the prompt's size, where the engine sends them
    # (llama-server: `n_ctx`, `n_prompt_tokens`): such an error is over-length.
    window_fields: tuple[str, str] | None = None

    def reasoning(self, obj: Mapping[str, object]) -> str:
        """The reasoning text of a message or delta: vLLM 0.11-0.2x send both, the same text."""
        for key in self.reasoning_fields:
            value = obj.get(key)
            if isinstance(value, str) and value:
                return value
        return ""

    def error(self, body: object) -> ServerError | None:
        """An error body in either shape, with the window and prompt size an over-length
        message names; None when the body is not an error."""
        if not isinstance(body, dict):
            return None
        nested = body.get("error")
        if isinstance(nested, dict):
            err, shape = nested, "nested"
        elif body.get("object") == "error" or ("message" in body and "choices" not in body):
            err, shape = body, "flat"
        else:
            return None
        message, kind, limit, prompt = str(err.get("message") or ""), None, None, None
        for length, pattern in self.length_errors:
            m = re.search(pattern, message)
            if m is not None:
                said = m.groupdict().get("prompt")
                kind, limit, prompt = length, int(m.group("limit")), int(said) if said else None
                break
        if self.window_fields is not None and isinstance(err.get(self.window_fields[0]), int):
            n_prompt = err.get(self.window_fields[1])
            kind, limit = "over-length", err[self.window_fields[0]]
            prompt = n_prompt if isinstance(n_prompt, int) else prompt
        typ, param = (
            v if isinstance(v, str) else None for v in (err.get("type"), err.get("param"))
        )
        return ServerError(message, typ, param, shape, kind, limit, prompt)


ANY_ENGINE = Quirks()


@dataclass
class ToolCall:
    index: int
    id: str | None = None
    name: str | None = None
    arguments: str = ""

    def parsed_arguments(self) -> tuple[object, str | None]:
        try:
            return json.loads(self.arguments or "{}"), None
        except ValueError as exc:
            return None, f"arguments are not JSON ({exc}): {self.arguments[:120]!r}"

    def as_dict(self) -> dict[str, int | str | None]:
        return {"index": self.index, "id": self.id, "name": self.name, "arguments": self.arguments}


@dataclass
class ChatOutcome:
    """What a chat completion said, and when each part of it arrived."""

    content: str = ""
    reasoning: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish_reason: str | None = None
    usage: dict[str, object] | None = None
    timings: dict[str, object] | None = None
    server_metrics: dict[str, object] | None = None
    chunks: int = 0
    done: bool = False
    malformed: list[str] = field(default_factory=list)
    t_first_output: float | None = None
    t_first_visible: float | None = None
    t_last_token: float | None = None
    t_finish: float | None = None
    t_end: float | None = None
    token_chunk_times: list[float] = field(default_factory=list)
    # len(content) after each chunk that added to it: the stream's token boundaries in the text
    content_ends: list[int] = field(default_factory=list)
    http_status: int | None = None
    error: str | None = None
    error_kind: str | None = None
    server_error: ServerError | None = None
    raw_body: Any = None  # the server's JSON answer, raw

    @property
    def completion_tokens(self) -> int | None:
        return _int((self.usage or {}).get("completion_tokens"))

    @property
    def prompt_tokens(self) -> int | None:
        return _int((self.usage or {}).get("prompt_tokens"))

    @property
    def cached_tokens(self) -> int | None:
        details = (self.usage or {}).get("prompt_tokens_details") or {}
        cached = _int(details.get("cached_tokens") if isinstance(details, dict) else None)
        return _int((self.timings or {}).get("cache_n")) if cached is None else cached


def _int(n: object) -> int | None:
    return int(n) if isinstance(n, int) else None


def _merge_tool_delta(calls: dict[int, ToolCall], delta: dict[str, Any]) -> None:  # raw delta
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


def from_stream(ex: Exchange, quirks: Quirks = ANY_ENGINE) -> ChatOutcome:
    """Join the recorded SSE events of a streamed chat completion."""
    out = _base(ex)
    if not ex.events and ex.body is not None:
        return _fill_error(out, ex, quirks)
    calls: dict[int, ToolCall] = {}
    for ev in ex.events:
        if ev.data.strip() == "[DONE]":
            out.done = True
            continue
        out.chunks += 1
        try:
            chunk = json_loads(ev.data)
        except ValueError:
            chunk = None
        if not isinstance(chunk, dict):
            out.malformed.append(ev.data[:200])
            continue
        if "error" in chunk:
            out.error = error_message(chunk)[0]
            out.server_error = quirks.error(chunk)
            continue
        if isinstance(chunk.get("usage"), dict):
            out.usage = chunk["usage"]
        if isinstance(chunk.get("timings"), dict):
            out.timings = chunk["timings"]
        if isinstance(chunk.get("metrics"), dict):
            out.server_metrics = chunk["metrics"]
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            reasoning = quirks.reasoning(delta)
            out.reasoning += reasoning
            content = delta.get("content")
            visible = isinstance(content, str) and content != ""
            if visible:
                out.content += str(content)
                out.content_ends.append(len(out.content))
            for tc in delta.get("tool_calls") or []:
                _merge_tool_delta(calls, tc)
                visible = True
            if visible and out.t_first_visible is None:
                out.t_first_visible = ev.t
            if visible or reasoning:
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


def from_response(ex: Exchange, quirks: Quirks = ANY_ENGINE) -> ChatOutcome:
    """Read a non-streamed chat completion."""
    out = _base(ex)
    body = ex.body
    if not ex.ok or not isinstance(body, dict) or "choices" not in body:
        return _fill_error(out, ex, quirks)
    choice = (body.get("choices") or [{}])[0]
    msg = choice.get("message") or {}
    out.content = msg.get("content") or ""
    out.reasoning = quirks.reasoning(msg)
    for i, tc in enumerate(msg.get("tool_calls") or []):
        fn = tc.get("function") or {}
        args = fn.get("arguments")
        args = args if isinstance(args, str) else json.dumps(args)
        out.tool_calls.append(ToolCall(i, tc.get("id"), fn.get("name"), args))
    out.finish_reason = choice.get("finish_reason")
    out.usage = body.get("usage")
    out.timings = body.get("timings")
    if isinstance(body.get("metrics"), dict):
        out.server_metrics = body["metrics"]
    return out


def _base(ex: Exchange) -> ChatOutcome:
    error, kind = ex.error or None, ex.error_kind
    return ChatOutcome(
        http_status=ex.status, t_end=ex.t_end, raw_body=ex.body, error=error, error_kind=kind
    )


def _fill_error(out: ChatOutcome, ex: Exchange, quirks: Quirks) -> ChatOutcome:
    if ex.error:
        return out
    out.server_error = quirks.error(ex.body)
    msg = error_message(ex.body if ex.body is not None else ex.text)[0]
    out.error = msg or f"HTTP {ex.status} with no usable body"
    return out
