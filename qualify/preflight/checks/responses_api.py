"""Responses API: a plain call, a function call, its continuation, and a streamed call; their
answers read (output items, message text, the streamed event order)."""

from __future__ import annotations

import json
from itertools import pairwise
from typing import Any, Literal

from pydantic import Field

from qualify.gates.files import Params
from qualify.gates.probe import GateContext
from qualify.gates.registry import Outcome, check
from qualify.httpclient.chat import ToolCall
from qualify.httpclient.client import SSEEvent
from qualify.preflight.budget import answer_budget
from qualify.preflight.checks.common import (
    Tools,
    clip,
    exchange_problem,
    flat_tools,
    judge_call,
    tool_schemas,
)
from qualify.preflight.checks.tool_result import CALL_ID, ToolCallSpec, judge_text
from qualify.records import Verdict, worst

TERMINAL = {"response.completed", "response.incomplete", "response.failed", "error"}


def output_items(body: object, kind: str) -> list[dict[str, Any]]:  # raw server JSON
    items = body.get("output") if isinstance(body, dict) else None
    return [i for i in items or [] if isinstance(i, dict) and i.get("type") == kind]


def text_of(body: object, kind: Literal["message", "reasoning"]) -> str:  # raw server JSON
    """The text of every `message` output item (its `output_text` parts: the visible answer) or
    every `reasoning` one (its `reasoning_text` parts), joined."""
    part = "output_text" if kind == "message" else "reasoning_text"
    return "".join(
        str(c.get("text") or "")
        for item in output_items(body, kind)
        for c in item.get("content") or []
        if isinstance(c, dict) and c.get("type") == part
    )


def incomplete_reason(body: object) -> str | None:  # raw server JSON
    """`incomplete_details.reason` of a response whose `status` is `incomplete` (vLLM ends a
    cut answer so: `max_output_tokens`), else None."""
    if not isinstance(body, dict) or body.get("status") != "incomplete":
        return None
    details = body.get("incomplete_details")
    reason = details.get("reason") if isinstance(details, dict) else None
    return str(reason or "unknown")


def terminal(
    parsed: list[tuple[str, dict[str, object]]],  # raw server JSON
) -> tuple[str | None, str | None]:
    """The last event's type and, when its response is `incomplete`, the reason. vLLM 0.26
    (recorded) ends a cut stream with `response.completed` whose response has status
    `incomplete` and `incomplete_details.reason` `max_output_tokens`; the Responses API
    documents a `response.incomplete` event for it: both are read."""
    if not parsed:
        return None, None
    kind, data = parsed[-1]
    return kind, incomplete_reason(data.get("response"))


def parse_events(
    events: list[SSEEvent],
) -> tuple[list[tuple[str, dict[str, object]]], list[str]]:  # raw server JSON
    """(type, payload) per event, the type from the `event:` line or the payload; and the bad."""
    out, bad = [], []
    for ev in events:
        try:
            data = json.loads(ev.data)
        except ValueError:
            bad.append(ev.data[:120])
            continue
        if not isinstance(data, dict):
            bad.append(ev.data[:120])
            continue
        out.append((str(data.get("type") or ev.event), data))
    return out, bad


def _index(types: list[str], name: str, last: bool = False) -> int | None:
    hits = [i for i, t in enumerate(types) if t == name]
    return (hits[-1] if last else hits[0]) if hits else None


def order_problems(parsed: list[tuple[str, dict[str, object]]]) -> list[str]:  # raw server JSON
    """Why the events are not in the documented order (empty when they are)."""
    types = [t for t, _ in parsed]
    if not types:
        return ["no events"]
    problems = []
    if types[0] != "response.created":
        problems.append(f"the first event is {types[0]!r}, expected 'response.created'")
    last, why = terminal(parsed)
    if last in ("response.incomplete", "response.completed") and why == "max_output_tokens":
        pass  # a cut answer ends so: the answer is judged from what it holds
    elif last == "response.completed" and why is not None:
        problems.append(f"the stream ends incomplete: incomplete_details.reason {why!r}")
    elif types[-1] != "response.completed":
        problems.append(
            f"the last event is {types[-1]!r}, expected 'response.completed' (or "
            "'response.incomplete' with incomplete_details.reason max_output_tokens)"
        )
    early = [t for t in types[:-1] if t in TERMINAL]
    if early:
        problems.append(f"{early[0]!r} arrived before the end of the stream")
    added = _index(types, "response.output_item.added")
    first_delta = _index(types, "response.output_text.delta")
    last_delta = _index(types, "response.output_text.delta", last=True)
    done = _index(types, "response.output_item.done", last=True)
    if first_delta is None and "response.reasoning_text.delta" in types:
        pass  # reasoning only: named by the caller, not an order problem
    elif first_delta is None:
        problems.append("no response.output_text.delta event")
    elif added is None or added > first_delta:
        problems.append("text deltas arrived before response.output_item.added")
    elif last_delta is not None and (done is None or done < last_delta):
        problems.append("text deltas arrived after response.output_item.done (or it never came)")
    seq = [n for _, d in parsed if isinstance(n := d.get("sequence_number"), int)]
    if seq and any(b <= a for a, b in pairwise(seq)):
        problems.append("sequence_number does not increase from event to event")
    return problems


def streamed_text(
    parsed: list[tuple[str, dict[str, object]]],  # raw server JSON
) -> tuple[str, str | None]:
    """The text joined from deltas, and the text `output_text.done` reported (if any)."""
    joined = "".join(
        str(d.get("delta") or "") for t, d in parsed if t == "response.output_text.delta"
    )
    done = [d.get("text") for t, d in parsed if t == "response.output_text.done"]
    return joined, (str(done[-1]) if done and done[-1] is not None else None)


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
