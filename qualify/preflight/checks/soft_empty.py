"""soft-empty: reasoning that used the budget with no visible answer fails, and says so."""

from __future__ import annotations

from pydantic import Field

from qualify.gates.files import Params
from qualify.gates.probe import GateContext
from qualify.gates.registry import Outcome, check
from qualify.httpclient.chat import ChatOutcome
from qualify.preflight.budget import answer_budget
from qualify.preflight.checks.common import answer_metrics, chat_problem, user


class SoftEmptyParams(Params):
    prompt: str = Field(min_length=1)
    max_tokens: int | None = Field(default=None, gt=0)


def judge(o: ChatOutcome) -> list[str]:
    """Why an answer is soft-empty (empty when there is visible content or a tool call)."""
    if o.content.strip() or o.tool_calls:
        return []
    tokens = o.completion_tokens
    spent = f"{tokens} completion tokens" if tokens is not None else "completion tokens unknown"
    if not o.reasoning.strip():
        return [
            f"empty answer: no visible content and no reasoning (finish_reason={o.finish_reason})"
        ]
    if o.finish_reason == "length":
        return [
            f"soft-empty: reasoning used the whole budget (finish_reason=length, {spent}, "
            f"{len(o.reasoning)} characters of reasoning) and left no visible answer"
        ]
    return [
        f"soft-empty: the answer ended inside reasoning (finish_reason={o.finish_reason}, "
        f"{spent}, {len(o.reasoning)} characters of reasoning) with no visible answer"
    ]


@check("soft_empty", params=SoftEmptyParams)
async def soft_empty(ctx: GateContext, p: SoftEmptyParams) -> Outcome:
    """Pass when the answer has visible content; fail when reasoning took all of it."""
    o = await ctx.chat(
        "soft-empty", ctx.body([user(p.prompt)], max_tokens=answer_budget(ctx, p.max_tokens))
    )
    if bad := chat_problem(o, "soft-empty request"):
        return bad
    problems = judge(o)
    m = answer_metrics(o)
    return Outcome.failed(*problems, metrics=m) if problems else Outcome.passed(m)
