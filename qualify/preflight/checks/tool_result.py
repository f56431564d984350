"""tool-result continuation: the tool's result goes back and the answer uses it."""

from __future__ import annotations

import json

from pydantic import Field, model_validator

from qualify.gates.files import Params
from qualify.gates.probe import GateContext
from qualify.gates.registry import Outcome, check
from qualify.preflight.budget import answer_budget, reasoning_only
from qualify.preflight.checks.common import Tools, answer_metrics, chat_problem, clip, user
from qualify.preflight.checks.text import leaked_markup

CALL_ID = "call_qualify_1"


class ToolCallSpec(Params):
    name: str
    arguments: dict[str, object]


class ToolResultParams(Params):
    tools: Tools
    prompt: str = Field(min_length=1)
    call: ToolCallSpec
    result: str = Field(min_length=1, description="what the tool returned")
    expect: list[str] = Field(min_length=1, description="values only the result contains")
    max_tokens: int | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _only_in_result(self) -> ToolResultParams:
        # The check is only deterministic if the expected values can come from the result alone.
        for value in self.expect:
            if value not in self.result:
                raise ValueError(f"expect value {value!r} is not in the tool result")
            if value in self.prompt:
                raise ValueError(f"expect value {value!r} is in the prompt, not only the result")
        return self


def judge_text(text: str, expect: list[str]) -> list[str]:
    """Why an answer does not use the tool result (empty when it does)."""
    if not text.strip():
        return ["no visible answer after the tool result"]
    problems = [
        f"the answer does not contain {v!r}, which only the tool result holds "
        f"(answer: {clip(text.strip(), 100)!r})"
        for v in expect
        if v not in text
    ]
    if found := leaked_markup(text):
        problems.append(f"the answer echoes tool markup {found} instead of using the result")
    return problems


def messages(p: ToolResultParams) -> list[dict[str, object]]:
    call = {"name": p.call.name, "arguments": json.dumps(p.call.arguments)}
    return [
        user(p.prompt),
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": CALL_ID, "type": "function", "function": call}],
        },
        {"role": "tool", "tool_call_id": CALL_ID, "content": p.result},
    ]


@check("tool_result", params=ToolResultParams)
async def tool_result(ctx: GateContext, p: ToolResultParams) -> Outcome:
    """Pass when the answer after a `role: tool` turn states a value only the result holds."""
    body = ctx.body(
        messages(p), max_tokens=answer_budget(ctx, p.max_tokens), tools=ctx.load_json(p.tools)
    )
    o = await ctx.chat("tool-result", body)
    if bad := chat_problem(o, "continuation request") or reasoning_only(o, ctx, "tool result"):
        return bad
    problems = judge_text(o.content, p.expect)
    m = answer_metrics(o)
    return Outcome.failed(*problems, metrics=m) if problems else Outcome.passed(m)
