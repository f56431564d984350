"""truncation: a small `max_tokens` reports `finish_reason=length`, for text and a tool call."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from qualify.gates.files import Params
from qualify.gates.probe import GateContext
from qualify.gates.registry import Outcome, check
from qualify.httpclient.chat import ChatOutcome
from qualify.preflight.checks.common import Tools, answer_metrics, chat_problem, user
from qualify.records import Verdict, worst


class TruncationParams(Params):
    prompt: str = Field(min_length=1, description="asks for a long answer")
    max_tokens: int = Field(default=8, gt=0)
    tools: Tools
    tool_prompt: str = Field(min_length=1, description="asks for a tool call")
    tool_choice: Literal["auto", "required"] = "required"
    tool_max_tokens: int = Field(default=12, gt=0, description="cuts the call's arguments short")


def judge_length(o: ChatOutcome, limit: int, what: str) -> list[str]:
    """Why a cut-off answer does not report `length` honestly."""
    problems = []
    if o.finish_reason != "length":
        problems.append(
            f"{what}: finish_reason is {o.finish_reason!r} with max_tokens={limit} "
            f"({o.completion_tokens} completion tokens), expected 'length'"
        )
    if o.completion_tokens is not None and o.completion_tokens > limit:
        problems.append(f"{what}: {o.completion_tokens} completion tokens, over max_tokens={limit}")
    return problems


def judge_tool(o: ChatOutcome, limit: int) -> Outcome:
    started = bool(o.tool_calls) or "<tool_call>" in o.content
    if not started:
        return Outcome(
            Verdict.INCONCLUSIVE,
            [
                f"tool call: the model began no tool call within {limit} tokens, so a cut-off "
                "call was not exercised"
            ],
        )
    problems = judge_length(o, limit, "tool call")
    if o.finish_reason != "length":
        # Said complete while the arguments are cut: a client would run a broken call.
        broken = [(c, c.parsed_arguments()[1]) for c in o.tool_calls]
        problems.extend(
            f"tool call {c.name}: reported complete but {bad}" for c, bad in broken if bad
        )
    return Outcome.failed(*problems) if problems else Outcome.passed()


@check("truncation", params=TruncationParams)
async def truncation(ctx: GateContext, p: TruncationParams) -> Outcome:
    """Pass when a cut-off text answer and a cut-off tool call both say `length`."""
    text = await ctx.chat("truncation-text", ctx.body([user(p.prompt)], max_tokens=p.max_tokens))
    if bad := chat_problem(text, "text request"):
        return bad
    text_out = judge_length(text, p.max_tokens, "text")
    tools = ctx.load_json(p.tools)
    body = ctx.body(
        [user(p.tool_prompt)], max_tokens=p.tool_max_tokens, tools=tools, tool_choice=p.tool_choice
    )
    tool = await ctx.chat("truncation-tool", body)
    if bad := chat_problem(tool, "tool request"):
        return bad
    tool_out = judge_tool(tool, p.tool_max_tokens)
    metrics: dict[str, object] = {
        "text": answer_metrics(text),
        "tool": {**answer_metrics(tool), "tool_calls": [c.as_dict() for c in tool.tool_calls]},
        "finish_reason": text.finish_reason,
    }
    verdict = worst([Verdict.FAIL if text_out else Verdict.PASS, tool_out.verdict])
    return Outcome(verdict, text_out + tool_out.reasons, metrics)
