"""The deep-context tool battery: tool calls asked at the end of the deepest rung's prompt.

Three requests through the server's own tool parsers, each behind the same long document (so
the first one pays the prefill and the others reuse the prefix cache):
- `typed`: three typed tools declared, `tool_choice: required`, not streamed: the call must name
  the asked tool and its arguments validate against its schema, finish_reason `tool_calls`;
- `streaming`: the same request streamed: the call reassembled from its deltas (index, id,
  argument fragments), with an id;
- `tool-result`: the call and a `role: tool` result go back; the answer must state a value only
  the result holds and echo no tool markup.

The prompt with its tools is sized with the server's tokenizer to the rung's planned tokens, so
it fits the same window. The stage records what the server answered (`data.battery`); the gates
(`context-tools`) judge it with the preflight's judges, so the verdict follows from the evidence.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal

from qualify.context.record import Case, ToolCallRecord
from qualify.gates.files import default_gates_dir
from qualify.httpclient.chat import ChatOutcome, ToolCall
from qualify.preflight.checks.common import INFRA_KINDS, judge_calls, tool_schemas
from qualify.preflight.checks.text import leaked_markup

CaseName = Literal["typed", "streaming", "tool-result"]
TOOLS_FILE = "schemas/tools/three-typed-tools.json"
CALL_ID = "call_qualify_deep_1"
EXPECT_TOOL = "book_table"
CALL_PROMPT = (
    "Now a task that does not depend on the document. Reply with exactly this block and "
    "nothing else:\n<tool_call>\n"
    '{"name": "book_table", "arguments": {"restaurant": "Chez Lune", "party_size": 4, '
    '"contact": {"name": "Ada", "phone": "555-0101"}}}\n</tool_call>'
)
RESULT_PROMPT = "Now a task that does not depend on the document: what is the temperature in Paris?"
RESULT_CALL = {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}
RESULT = '{"city": "Paris", "temperature": "13.4 C", "station": "ORLY-4471"}'
RESULT_EXPECT = ("13.4",)
# What a case records of its outcome under the same name.
_AS_SENT = ("http_status", "finish_reason", "prompt_tokens", "cached_tokens", "completion_tokens")


def load_tools(gates_dir: Path) -> list[dict[str, object]]:
    """The typed tools the preflight declares, from the gates folder in use (else the
    project's)."""
    for base in (gates_dir, default_gates_dir()):
        path = base / TOOLS_FILE
        if path.is_file():
            tools = json.loads(path.read_text())
            return tools if isinstance(tools, list) else []
    return []


def continuation(first: Sequence[Mapping[str, str]]) -> list[Mapping[str, object]]:
    """The tool-result request's messages: the user turn, the call, the tool's result."""
    call = {"name": RESULT_CALL["name"], "arguments": json.dumps(RESULT_CALL["arguments"])}
    return [
        *first,
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": CALL_ID, "type": "function", "function": call}],
        },
        {"role": "tool", "tool_call_id": CALL_ID, "content": RESULT},
    ]


def _problem(o: ChatOutcome) -> str | None:
    """Why a case's exchange cannot be judged (transport, HTTP 5xx), or None."""
    if o.error_kind in INFRA_KINDS:
        return f"request failed: {o.error}"
    if o.http_status is None:
        return f"no response ({o.error or 'nothing received'})"
    if o.http_status >= 500:
        return f"server error HTTP {o.http_status}"
    return None


def record(case: CaseName, o: ChatOutcome, files: list[str]) -> Case:
    """What the server answered to one case, as the gates read it."""
    return Case(
        case=case,
        problem=_problem(o),
        tool_calls=[ToolCallRecord.model_validate(c.as_dict()) for c in o.tool_calls],
        answer=o.content,
        reasoning_chars=len(o.reasoning),
        **{k: getattr(o, k) for k in _AS_SENT},
        sse_chunks=o.chunks,
        files=files,
    )


def judge_case(rec: Case, tools: Sequence[Mapping[str, object]]) -> list[str]:
    """Why one case's answer is wrong (empty when it is right), by the preflight's judges."""
    said = rec.answer.strip()
    if rec.case == "tool-result":
        if not said:
            return ["no visible answer after the tool result"]
        problems = [
            f"the answer does not contain {v!r}, which only the tool result holds "
            f"(answer: {said[:100]!r})"
            for v in RESULT_EXPECT
            if v not in said
        ]
        if found := leaked_markup(said):
            problems.append(f"the answer echoes tool markup {found} instead of using the result")
        return problems
    calls = [ToolCall(**c.model_dump()) for c in rec.tool_calls]
    if not calls:
        shown = said[:80] or "nothing visible"
        return [f"no tool call (finish_reason={rec.finish_reason}; the answer was {shown!r})"]
    problems = judge_calls(calls, tool_schemas([dict(t) for t in tools]), EXPECT_TOOL)
    if not problems and rec.finish_reason != "tool_calls":
        problems.append(
            f"finish_reason is {rec.finish_reason!r} after a tool call, expected 'tool_calls'"
        )
    if rec.case == "streaming":
        problems += [
            f"tool call {c.index} ({c.name}): no id in any of its deltas" for c in calls if not c.id
        ]
    return problems
