"""Responses API: a plain call, a function call, its continuation, and a streamed call."""

from __future__ import annotations

import json

from pydantic import Field

from qualify.gates.files import Params
from qualify.gates.probe import GateContext
from qualify.gates.registry import Outcome, check
from qualify.httpclient.chat import ToolCall
from qualify.preflight.budget import answer_budget
from qualify.preflight.checks.common import (
    Tools,
    clip,
    exchange_problem,
    flat_tools,
    judge_call,
    tool_schemas,
)
from qualify.preflight.checks.responses_read import (
    incomplete_reason,
    order_problems,
    output_items,
    parse_events,
    streamed_text,
    terminal,
    text_of,
)
from qualify.preflight.checks.tool_result import CALL_ID, ToolCallSpec, judge_text
from qualify.records import Verdict, worst


class ResponsesParams(Params):
    prompt: str = Field(min_length=1, description="the plain and the streamed call")
    tools: Tools
    call_prompt: str = Field(min_length=1, description="asks for a call of `call.name`")
    call: ToolCallSpec = Field(description="the call the continuation sends back")
    continue_prompt: str = Field(min_length=1)
    result: str = Field(min_length=1)
    expect: list[str] = Field(min_length=1, description="values only the result contains")
    max_output_tokens: int = Field(default=64, gt=0)


def _part(name: str, problems: list[str], verdict: Verdict = Verdict.FAIL) -> Outcome:
    if not problems:
        return Outcome.passed()
    return Outcome(verdict, [f"{name}: {p}" for p in problems])


def _reasoning_only(name: str, cut: str | None, budget: int) -> Outcome:
    how = (
        f"the response is incomplete ({cut}) after {budget} output tokens, all of them reasoning"
        if cut
        else "the response holds reasoning and no message"
    )
    return Outcome(
        Verdict.INCONCLUSIVE,
        [f"{name}: reasoning-only completion, no visible answer to judge: {how}"],
        {"reasoning_only": True, "incomplete": cut},
    )


async def plain(ctx: GateContext, p: ResponsesParams) -> Outcome:
    budget = answer_budget(ctx, p.max_output_tokens)
    body = {"input": p.prompt, "max_output_tokens": budget}
    ex = await ctx.responses("responses-plain", body)
    if bad := exchange_problem(ex, "plain call"):
        return bad
    cut = incomplete_reason(ex.body)
    text = text_of(ex.body, "message").strip()
    if not text and text_of(ex.body, "reasoning").strip():
        return _reasoning_only("plain call", cut, budget)
    problems = [] if text else ["no output_text in a message item"]
    if cut is not None and cut != "max_output_tokens":
        problems.append(f"the response is incomplete: incomplete_details.reason {cut!r}")
    if not isinstance(ex.body, dict) or not isinstance(ex.body.get("usage"), dict):
        problems.append("the response carries no usage")
    return _part("plain call", problems)


async def function_call(ctx: GateContext, p: ResponsesParams) -> Outcome:
    tools = ctx.load_json(p.tools)
    body = {
        "input": p.call_prompt,
        "tools": flat_tools(tools),
        "tool_choice": "required",
        "max_output_tokens": answer_budget(ctx, p.max_output_tokens),
    }
    ex = await ctx.responses("responses-function-call", body)
    if bad := exchange_problem(ex, "function call"):
        return bad
    items = output_items(ex.body, "function_call")
    if not items:
        said = clip(text_of(ex.body, "message").strip(), 80) or "nothing visible"
        return _part("function call", [f"no function_call output item (the answer was {said!r})"])
    problems = [] if items[0].get("call_id") else ["the function_call item has no call_id"]
    args = items[0].get("arguments")
    call = ToolCall(
        0,
        items[0].get("call_id"),
        items[0].get("name"),
        args if isinstance(args, str) else json.dumps(args),
    )
    problems.extend(judge_call(call, tool_schemas(tools), p.call.name))
    return _part("function call", problems)


async def continuation(ctx: GateContext, p: ResponsesParams) -> Outcome:
    # A fixed call, so the continuation is judged even where the model cannot make a call.
    items: list[dict[str, str]] = [
        {"role": "user", "content": p.continue_prompt},
        {
            "type": "function_call",
            "call_id": CALL_ID,
            "name": p.call.name,
            "arguments": json.dumps(p.call.arguments),
        },
        {"type": "function_call_output", "call_id": CALL_ID, "output": p.result},
    ]
    budget = answer_budget(ctx, p.max_output_tokens)
    body = {
        "input": items,
        "tools": flat_tools(ctx.load_json(p.tools)),
        "max_output_tokens": budget,
    }
    ex = await ctx.responses("responses-continuation", body)
    if bad := exchange_problem(ex, "function_call_output continuation"):
        return bad
    text = text_of(ex.body, "message")
    if not text.strip() and text_of(ex.body, "reasoning").strip():
        cut = incomplete_reason(ex.body)
        return _reasoning_only("function_call_output continuation", cut, budget)
    return _part("function_call_output continuation", judge_text(text, p.expect))


async def streamed(ctx: GateContext, p: ResponsesParams) -> Outcome:
    budget = answer_budget(ctx, p.max_output_tokens)
    ex = await ctx.responses(
        "responses-stream", {"input": p.prompt, "max_output_tokens": budget}, stream=True
    )
    if bad := exchange_problem(ex, "streamed call"):
        return bad
    parsed, malformed = parse_events(ex.events)
    if malformed:
        why = f"{len(malformed)} event(s) are not JSON objects, first {malformed[0]!r}"
        return _part("streamed call", [f"malformed stream: {why}"], Verdict.ERROR)
    problems = order_problems(parsed)
    joined, done = streamed_text(parsed)
    types = {t for t, _ in parsed}
    if not problems and not joined and "response.reasoning_text.delta" in types:
        return _reasoning_only("streamed call", terminal(parsed)[1], budget)
    if done is not None and done != joined:
        problems.append("the joined text deltas differ from output_text.done")
    return _part("streamed call", problems)


@check("responses_api", params=ResponsesParams)
async def responses_api(ctx: GateContext, p: ResponsesParams) -> Outcome:
    """Pass when all four Responses calls are answered as the API documents."""
    parts = [await plain(ctx, p), await function_call(ctx, p)]
    parts += [await continuation(ctx, p), await streamed(ctx, p)]
    reasons = [r for o in parts for r in o.reasons]
    verdicts = {
        n: o.verdict.value
        for n, o in zip(("plain", "function_call", "continuation", "stream"), parts, strict=True)
    }
    return Outcome(worst([o.verdict for o in parts]), reasons, {"parts": verdicts})
