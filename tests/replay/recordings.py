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
        plain = [
            json.loads(d)
            for _, d in sse_events(engine_dir / "chat_stream_reasoning.sse")
            if d != "[DONE]"
        ]
        tools = [
            json.loads(d)
            for _, d in sse_events(engine_dir / "chat_stream_tool.sse")
            if d != "[DONE]"
        ]

        def delta(chunk: dict[str, Any]) -> dict[str, Any]:
            return dict(chunk["choices"][0]["delta"]) if chunk["choices"] else {}

        def first(chunks: list[dict[str, Any]], test: Any) -> dict[str, Any]:
            return next(c for c in chunks if test(c))

        with_tools = [c for c in tools if c["choices"] and delta(c).get("tool_calls")]
        return cls(
            role=first(plain, lambda c: c["choices"] and delta(c).get("role")),
            reasoning=first(
                plain, lambda c: c["choices"] and any(delta(c).get(k) for k in REASONING_KEYS)
            ),
            content=first(plain, lambda c: c["choices"] and delta(c).get("content")),
            finish=first(plain, lambda c: c["choices"] and c["choices"][0]["finish_reason"]),
            usage=first(plain, lambda c: not c["choices"]),
            tool_first=with_tools[0],
            tool_more=with_tools[1],
            tool_finish=first(tools, lambda c: c["choices"] and c["choices"][0]["finish_reason"]),
            completion=json.loads((engine_dir / "chat_completion.json").read_text()),
        )


def responses_templates(engine_dir: Path) -> dict[str, dict[str, Any]]:
    """The first recorded event of each Responses event type, keyed by type."""
    out: dict[str, dict[str, Any]] = {}
    for name, data in sse_events(engine_dir / "responses_stream.sse"):
        body = json.loads(data)
        key = name or body["type"]
        if key == "response.output_item.added" and key in out:
            key = "response.output_item.added#message"
        if key == "response.output_item.done" and key in out:
            key = "response.output_item.done#message"
        out.setdefault(key, body)
    return out


def body(engine_dir: Path, name: str) -> Any:
    return json.loads((engine_dir / name).read_text())
