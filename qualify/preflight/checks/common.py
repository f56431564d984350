"""Pieces the checks share: transport problems, schema validation, tool-call judging."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated, TypeVar

from jsonschema import Draft202012Validator
from pydantic import Field

from qualify.gates.files import JsonFile
from qualify.gates.registry import Outcome
from qualify.httpclient.chat import ChatOutcome, ToolCall
from qualify.httpclient.client import Exchange, error_message

T = TypeVar("T")

Tools = Annotated[
    JsonFile, Field(description="a JSON list of chat tools, relative to the gates directory")
]

# The transport failures that say nothing about the candidate: the harness could not judge.
INFRA_KINDS = {"connect", "timeout", "dropped", "transport"}


def clip(text: str, n: int = 120) -> str:
    return text if len(text) <= n else text[: n - 3] + "..."


def _http_problem(status: int | None, body: object, what: str) -> Outcome | None:
    if status is None or status < 400:
        return None
    msg, typ = error_message(body)
    shown = f"{msg} ({typ})" if typ else (msg or "no message")
    if status >= 500:
        return Outcome.errored(f"{what}: server error HTTP {status}: {clip(shown, 200)}")
    return Outcome.failed(f"{what}: rejected with HTTP {status}: {clip(shown, 200)}")


def chat_problem(o: ChatOutcome, what: str, streamed: bool = False) -> Outcome | None:
    """An `error` or `fail` when the exchange itself broke, before the answer is judged."""
    if o.error_kind in INFRA_KINDS:
        return Outcome.errored(f"{what}: {o.error}")
    bad = _http_problem(o.http_status, o.raw_body if o.raw_body is not None else o.error, what)
    if bad is not None:
        return bad
    if o.http_status is None:
        return Outcome.errored(f"{what}: no response ({o.error or 'nothing received'})")
    if o.malformed:
        return Outcome.errored(
            f"{what}: malformed stream: {len(o.malformed)} SSE event(s) are not JSON objects, "
            f"first {clip(o.malformed[0], 80)!r}"
        )
    if o.error:
        return Outcome.failed(f"{what}: the server reported an error: {clip(o.error, 200)}")
    if streamed and not o.done:
        return Outcome.errored(f"{what}: the stream ended without its final [DONE] event")
    return None


def exchange_problem(ex: Exchange, what: str) -> Outcome | None:
    """The same as `chat_problem`, for a raw exchange (the Responses API)."""
    if ex.error_kind in INFRA_KINDS or ex.error:
        return Outcome.errored(f"{what}: {ex.error}")
    bad = _http_problem(ex.status, ex.body if ex.body is not None else ex.text, what)
    if bad is not None:
        return bad
    if ex.status is None:
        return Outcome.errored(f"{what}: no response")
    return None


def schema_errors(instance: object, schema: Schema, root: str) -> list[str]:
    """Every violation, each as `root.field message` (`root[0]` for an item), in a stable order."""
    validator = Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(instance), key=lambda e: list(map(str, e.absolute_path)))
    return [
        f"{root}{''.join(f'[{p}]' if isinstance(p, int) else f'.{p}' for p in e.absolute_path)} "
        f"{e.message}"
        for e in errors
    ]


Schema = Mapping[str, object] | bool
"""A JSON Schema: an object, or `true` / `false`."""


def _function(tool: Mapping[str, object]) -> Mapping[str, object]:
    """A chat tool's `function` (nested), or a Responses-style tool itself (flat)."""
    fn = tool.get("function", tool)
    return fn if isinstance(fn, Mapping) else tool


def tool_schemas(tools: Sequence[Mapping[str, object]]) -> dict[str, Schema]:
    """Tool name -> parameters schema, from chat-style (nested) or Responses-style (flat) tools."""
    out: dict[str, Schema] = {}
    for t in tools:
        fn = _function(t)
        params = fn.get("parameters")
        schema = params if isinstance(params, Mapping | bool) else None
        out[str(fn["name"])] = schema or {"type": "object"}
    return out


def flat_tools(tools: Sequence[Mapping[str, object]]) -> list[dict[str, object]]:
    """Chat tools in the Responses API form: `name`, `parameters` at the top level."""
    return [{"type": "function", **_function(t)} for t in tools]


def judge_call(call: ToolCall, schemas: Mapping[str, Schema], expect: str | None) -> list[str]:
    """Why one tool call is wrong: unknown or unexpected tool, arguments not JSON or invalid."""
    name = call.name or "(no name)"
    if call.name not in schemas:
        return [f"tool call names {name!r}, which is not a declared tool {sorted(schemas)}"]
    problems = []
    if expect is not None and call.name != expect:
        problems.append(f"tool call names {name!r}, expected {expect!r}")
    args, bad = call.parsed_arguments()
    if bad is not None:
        return [*problems, f"tool {name}: {bad}"]
    problems.extend(f"tool {name}: {e}" for e in schema_errors(args, schemas[name], "arguments"))
    return problems


def judge_calls(
    calls: list[ToolCall], schemas: Mapping[str, Schema], expect: str | None
) -> list[str]:
    if not calls:
        return ["no tool call in the answer"]
    return [p for call in calls for p in judge_call(call, schemas, expect)]


def answer_metrics(o: ChatOutcome) -> dict[str, object]:
    """The figures a gate reports: finish reason, tokens, time to first visible token."""
    return {
        "finish_reason": o.finish_reason,
        "completion_tokens": o.completion_tokens,
        "ttft_s": o.t_first_visible,
        "visible_chars": len(o.content),
        "reasoning_chars": len(o.reasoning),
    }


def user(text: str) -> dict[str, object]:
    return {"role": "user", "content": text}


def pick(items: Sequence[T], attempt: int) -> T:
    """The item an attempt uses: attempts cycle through a gate's cases in order."""
    return items[(attempt - 1) % len(items)]
