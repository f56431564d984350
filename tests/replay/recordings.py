"""The recorded engine outputs under tests/fixtures/engines/<engine>/, loaded as templates.

A `/metrics` page keeps its recorded lines (HELP, TYPE, label order) and only its sample values
change; an SSE recording is split into its chunk kinds (role, reasoning, content, tool calls,
finish, usage) so the replay can emit new text in the recorded envelopes.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "engines"

_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)\s*$")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="([^"]*)"')


@dataclass
class Sample:
    name: str
    labels: dict[str, str]
    label_text: str
    value: float


@dataclass
class MetricsPage:
    """A recorded Prometheus text page whose sample values the replay moves."""

    lines: list[str | Sample] = field(default_factory=list)

    @classmethod
    def load(cls, *paths: Path, model_name: str) -> MetricsPage:
        page = cls()
        for path in paths:
            for line in path.read_text().splitlines():
                if line.startswith("# FIXTURE") or line.startswith("# SOURCE"):
                    continue
                if line.startswith("# HELP") or line.startswith("# TYPE"):
                    page.lines.append(line)
                    continue
                m = _SAMPLE.match(line)
                if m is None:
                    continue  # the fixture's own header comments
                text = re.sub(r'model_name="[^"]*"', f'model_name="{model_name}"', m.group(2) or "")
                page.lines.append(
                    Sample(m.group(1), dict(_LABEL.findall(text)), text, float(m.group(3)))
                )
        return page

    def samples(self, name: str, **match: str) -> list[Sample]:
        return [
            s
            for s in self.lines
            if isinstance(s, Sample)
            and s.name == name
            and all(s.labels.get(k) == v for k, v in match.items())
        ]

    def has(self, name: str) -> bool:
        return bool(self.samples(name))

    def add(self, name: str, amount: float, **match: str) -> None:
        for s in self.samples(name, **match):
            s.value += amount

    def set(self, name: str, value: float, **match: str) -> None:
        for s in self.samples(name, **match):
            s.value = value

    def value(self, name: str, **match: str) -> float:
        return sum(s.value for s in self.samples(name, **match))

    def render(self) -> str:
        out = [
            line if isinstance(line, str) else f"{line.name}{line.label_text} {line.value!r}"
            for line in self.lines
        ]
        return "\n".join(out) + "\n"


def sse_events(path: Path) -> list[tuple[str | None, str]]:
    """(event name or None, data) for each event of a recorded SSE file."""
    events: list[tuple[str | None, str]] = []
    for block in path.read_text().split("\n\n"):
        name: str | None = None
        data: list[str] = []
        for line in block.splitlines():
            if line.startswith("event: "):
                name = line[len("event: ") :]
            elif line.startswith("data: "):
                data.append(line[len("data: ") :])
        if data:
            events.append((name, "\n".join(data)))
    return events


REASONING_KEYS = ("reasoning", "reasoning_content")


@dataclass
class ChatTemplates:
    """One recorded chunk per kind, from the engine's chat SSE recordings."""

    role: dict[str, Any]
    reasoning: dict[str, Any]
    content: dict[str, Any]
    finish: dict[str, Any]
    usage: dict[str, Any]
    tool_first: dict[str, Any]
    tool_more: dict[str, Any]
    tool_finish: dict[str, Any]
    completion: dict[str, Any]

    @classmethod
    def load(cls, engine_dir: Path) -> ChatTemplates:
        """The chunk kinds from the engine's recorded streams: `chat_stream_reasoning.sse`
        (and `chat_stream.sse` where content is recorded apart, as on vLLM 0.26 with a model
        that only reasons when asked) and `chat_stream_tool.sse` where a tool call was
        recorded; otherwise the tool-call deltas are built from the recorded content chunk in
        the engine's own shape (`_tool_chunks`)."""
        plain = [
            json.loads(d)
            for name in ("chat_stream_reasoning.sse", "chat_stream.sse")
            if (engine_dir / name).is_file()
            for _, d in sse_events(engine_dir / name)
            if d != "[DONE]"
        ]

        def delta(chunk: dict[str, Any]) -> dict[str, Any]:
            return dict(chunk["choices"][0]["delta"]) if chunk["choices"] else {}

        def first(chunks: list[dict[str, Any]], test: Any) -> dict[str, Any]:
            return next(c for c in chunks if test(c))

        content = first(plain, lambda c: c["choices"] and delta(c).get("content"))
        finish = first(plain, lambda c: c["choices"] and c["choices"][0]["finish_reason"])
        if (engine_dir / "chat_stream_tool.sse").is_file():
            tools = [
                json.loads(d)
                for _, d in sse_events(engine_dir / "chat_stream_tool.sse")
                if d != "[DONE]"
            ]
            with_tools = [c for c in tools if c["choices"] and delta(c).get("tool_calls")]
            tool_first, tool_more = with_tools[0], with_tools[1]
            tool_finish = first(tools, lambda c: c["choices"] and c["choices"][0]["finish_reason"])
        else:
            tool_first, tool_more, tool_finish = _tool_chunks(content, finish)
        return cls(
            role=first(plain, lambda c: c["choices"] and delta(c).get("role")),
            reasoning=first(
                plain, lambda c: c["choices"] and any(delta(c).get(k) for k in REASONING_KEYS)
            ),
            content=content,
            finish=finish,
            usage=first(plain, lambda c: not c["choices"]),
            tool_first=tool_first,
            tool_more=tool_more,
            tool_finish=tool_finish,
            completion=json.loads((engine_dir / "chat_completion.json").read_text()),
        )


def _tool_chunks(
    content: dict[str, Any], finish: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Tool-call chunks in the recorded chunk envelope, with vLLM's tool-call delta (its
    tool parsers, e.g. hermes_tool_parser.py: a first delta with `id`, `type`, `index` and
    `function.name`, then `index` and `function.arguments` fragments; `finish_reason`
    `tool_calls`). No recording holds one: vLLM 0.26 with SmolLM2 answered tool_choice
    `required` with text (fixtures/engines/vllm/chat_tool_required.json)."""

    def with_delta(template: dict[str, Any], d: dict[str, Any]) -> dict[str, Any]:
        c = json.loads(json.dumps(template))
        c["choices"][0]["delta"] = d
        return c

    head = {"id": "chatcmpl-tool-0", "type": "function", "index": 0, "function": {"name": ""}}
    more = {"index": 0, "function": {"arguments": ""}}
    done = with_delta(finish, {"content": ""})
    done["choices"][0]["finish_reason"] = "tool_calls"
    return (
        with_delta(content, {"tool_calls": [head]}),
        with_delta(content, {"tool_calls": [more]}),
        done,
    )


def responses_templates(engine_dir: Path) -> dict[str, dict[str, Any]]:
    """The first recorded event of each Responses event type, keyed by type: the reasoning
    item's events first (`responses_stream_reasoning.sse`, where recorded apart), then the
    message item's (`responses_stream.sse`), whose `output_item.added`/`.done` are keyed
    `#message`."""
    out: dict[str, dict[str, Any]] = {}
    files = [engine_dir / "responses_stream_reasoning.sse", engine_dir / "responses_stream.sse"]
    for path in (f for f in files if f.is_file()):
        for name, data in sse_events(path):
            body = json.loads(data)
            key = name or body["type"]
            item = body.get("item") if isinstance(body.get("item"), dict) else {}
            if key.startswith("response.output_item.") and item.get("type") == "message":
                key += "#message"
            out.setdefault(key, body)
    return out


def body(engine_dir: Path, name: str) -> Any:
    return json.loads((engine_dir / name).read_text())
