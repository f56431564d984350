"""typed tools: the call names the right tool and its arguments validate against its schema;
streamed, the same calls reassembled from their deltas (`tool_calls_stream`)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from qualify.gates.files import Params
from qualify.gates.probe import GateContext
from qualify.gates.registry import Outcome, check
from qualify.httpclient.chat import ChatOutcome
from qualify.preflight.budget import answer_budget, reasoning_only
from qualify.preflight.checks.common import (
    Tools,
    answer_metrics,
    chat_problem,
    clip,
    judge_calls,
    pick,
    tool_schemas,
    user,
)


class ToolCase(Params):
    prompt: str = Field(min_length=1)
    expect_tool: str = Field(description="the tool the call must name")


class ToolCallParams(Params):
    tools: Tools
    tool_choice: Literal["auto", "required"]
    cases: list[ToolCase] = Field(min_length=1, description="attempt n uses case n (cycling)")
    max_tokens: int | None = Field(default=None, gt=0)


async def run_case(
    ctx: GateContext, p: ToolCallParams, stream: bool
) -> tuple[Outcome, ChatOutcome]:
    tools = ctx.load_json(p.tools)
    case: ToolCase = pick(p.cases, ctx.attempt)
    body = ctx.body(
        [user(case.prompt)],
        max_tokens=answer_budget(ctx, p.max_tokens),
        tools=tools,
        tool_choice=p.tool_choice,
    )
    label = f"tools-{p.tool_choice}{'-stream' if stream else ''}-{case.expect_tool}"
    o = await ctx.chat(label, body, stream=stream)
    metrics = {**answer_metrics(o), "tool_choice": p.tool_choice, "expect_tool": case.expect_tool}
    metrics["tool_calls"] = [c.as_dict() for c in o.tool_calls]
    if bad := chat_problem(o, "tool request", streamed=stream):
        bad.metrics = metrics
        return bad, o
    if only := reasoning_only(o, ctx, "tool request"):
        only.metrics = {**metrics, **only.metrics}
        return only, o
    problems = judge_calls(o.tool_calls, tool_schemas(tools), case.expect_tool)
    if not o.tool_calls:
        said = clip(o.content.strip(), 80) or "nothing visible"
        problems = [f"no tool call (finish_reason={o.finish_reason}; the answer was {said!r})"]
    elif not problems and o.finish_reason != "tool_calls":
        # A client's agent loop runs tools only when told so by the finish reason.
        problems = [
            f"finish_reason is {o.finish_reason!r} after a tool call, expected 'tool_calls'"
        ]
    return Outcome.failed(*problems, metrics=metrics) if problems else Outcome.passed(metrics), o


@check("tool_calls", params=ToolCallParams)
async def tool_calls(ctx: GateContext, p: ToolCallParams) -> Outcome:
    """Pass when every call names the expected declared tool and its arguments validate."""
    outcome, _ = await run_case(ctx, p, stream=False)
    return outcome


@check("tool_calls_stream", params=ToolCallParams)
async def tool_calls_stream(ctx: GateContext, p: ToolCallParams) -> Outcome:
    """Pass when the deltas, joined by index, id and argument fragments, form a valid call."""
    outcome, o = await run_case(ctx, p, stream=True)
    outcome.metrics["sse_chunks"] = o.chunks
    if outcome.verdict.value != "pass":
        return outcome
    problems = [
        f"tool call {c.index} ({c.name}): no id in any of its deltas"
        for c in o.tool_calls
        if not c.id
    ]
    return Outcome.failed(*problems, metrics=outcome.metrics) if problems else outcome
