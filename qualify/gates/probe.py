"""What a probe is handed: the server, the reasoning level, and a place to keep evidence.

Every request goes through `chat` or `responses`, which merge the level's request fields, keep
the whole exchange (request, response or raw SSE, timings) and, for chat, a summary with the
reasoning and the visible content kept apart.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from qualify.httpclient.chat import ANY_ENGINE, ChatOutcome, Quirks, from_response, from_stream
from qualify.httpclient.client import Exchange

Keep = Callable[[str, Exchange], list[str]]
Write = Callable[[str, object], list[str]]


class Sender(Protocol):
    """What a probe sends through: the lane's `Client`, or verify's `Replay` of kept exchanges."""

    async def post(self, path: str, body: object, timeout_s: float | None = None) -> Exchange: ...

    async def stream(self, path: str, body: object, timeout_s: float | None = None) -> Exchange: ...


CHAT = "/v1/chat/completions"
RESPONSES = "/v1/responses"


@dataclass
class GateContext:
    """One probe gate at one reasoning level, one attempt at a time (`run_gate` sets `gate`,
    `attempt` and `files` before each attempt)."""

    client: Sender
    keep: Keep
    write: Write
    model: str
    level: str | None = None
    gate: str = "gate"
    fields: dict[str, object] = field(default_factory=dict)
    gates_dir: Path = Path("gates")
    max_tokens: int = 256
    timeout_s: float = 120.0
    temperature: float | None = 0.0
    window: int | None = None
    attempt: int = 1
    files: list[str] = field(default_factory=list)
    # How the server's engine words its answers (`qualify.serving.engine.adapter(e).quirks`):
    # its reasoning fields, its over-length errors (`ChatOutcome.server_error`).
    quirks: Quirks = ANY_ENGINE
    # The level's reasoning allowance (tokens) added to each answer budget, and where it came
    # from (`qualify.preflight.budget.allowance`); none where the stage gives none.
    reasoning_tokens: int = 0
    reasoning_source: str = ""
    _json: dict[str, object] = field(default_factory=dict)

    def body(self, messages: Sequence[Mapping[str, object]], **extra: object) -> dict[str, object]:
        """A chat request: model, messages, the level's fields, then the check's own fields."""
        body: dict[str, object] = {"model": self.model, "messages": messages}
        if self.temperature is not None:
            body["temperature"] = self.temperature
        body["max_tokens"] = self.max_tokens
        body.update(self.fields)
        body.update({k: v for k, v in extra.items() if v is not None})
        return body

    def _kept(self, label: str, ex: Exchange) -> list[str]:
        names = self.keep(f"{self.level or 'default'}-{self.gate}-{label}", ex)
        self.files.extend(names)
        return names

    async def chat(
        self, label: str, body: Mapping[str, object], stream: bool = False
    ) -> ChatOutcome:
        """Send a chat completion (streamed or not); keep it and its parsed summary."""
        if stream:
            body = {**body, "stream": True, "stream_options": {"include_usage": True}}
        send = self.client.stream if stream else self.client.post
        ex = await send(CHAT, body, timeout_s=self.timeout_s)
        o = (from_stream if stream else from_response)(ex, self.quirks)
        names = self._kept(label, ex)
        stem = names[0].removesuffix(".json") if names else label
        # the parsed answer as evidence: reasoning and visible content in separate fields
        summary = {
            "content": o.content,
            "reasoning": o.reasoning,
            "tool_calls": [c.as_dict() for c in o.tool_calls],
            "finish_reason": o.finish_reason,
            "usage": o.usage,
            "timings": o.timings,
            "http_status": o.http_status,
            "error": o.error,
            "error_kind": o.error_kind,
            "sse_chunks": o.chunks,
            "done": o.done,
            "malformed": o.malformed,
            "t_first_output_s": o.t_first_output,
            "t_first_visible_s": o.t_first_visible,
            "t_end_s": o.t_end,
        }
        self.files.extend(self.write(f"{stem}.outcome.json", summary))
        return o

    async def responses(
        self, label: str, body: Mapping[str, object], stream: bool = False
    ) -> Exchange:
        """Send a Responses API request with the level's fields in Responses form
        (`reasoning_effort` becomes `reasoning.effort`)."""
        fields = dict(self.fields)
        if (effort := fields.pop("reasoning_effort", None)) is not None:
            fields["reasoning"] = {"effort": effort}
        full: dict[str, object] = {"model": self.model, **fields, **body}
        if self.temperature is not None:
            full.setdefault("temperature", self.temperature)
        if stream:
            full["stream"] = True
        send = self.client.stream if stream else self.client.post
        ex = await send(RESPONSES, full, timeout_s=self.timeout_s)
        self._kept(label, ex)
        return ex

    def load_json(self, rel: str | Path) -> Any:  # the file's JSON, raw
        """A JSON file named by a gate's params, relative to the gates directory."""
        key = str(rel)
        if key not in self._json:
            self._json[key] = json.loads((self.gates_dir / rel).read_text())
        return self._json[key]
