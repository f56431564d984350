"""smoke: a short question gets a visible answer and `usage`."""

from __future__ import annotations

from pydantic import Field

from qualify.gates.files import Params
from qualify.gates.probe import GateContext
from qualify.gates.registry import Outcome, check
from qualify.preflight.budget import answer_budget, reasoning_only
from qualify.preflight.checks.common import answer_metrics, chat_problem, user


class SmokeParams(Params):
    prompt: str = Field(min_length=1)
    max_tokens: int | None = Field(default=None, gt=0)


@check("smoke", params=SmokeParams)
async def smoke(ctx: GateContext, p: SmokeParams) -> Outcome:
    """Pass when a short question gets visible content and `usage.completion_tokens`."""
    o = await ctx.chat(
        "smoke", ctx.body([user(p.prompt)], max_tokens=answer_budget(ctx, p.max_tokens))
    )
    if bad := chat_problem(o, "smoke request") or reasoning_only(o, ctx, "smoke"):
        return bad
    problems = []
    if not o.content.strip():
        problems.append(
            f"no visible answer (finish_reason={o.finish_reason}, "
            f"{len(o.reasoning)} characters of reasoning only)"
        )
    if o.completion_tokens is None:
        problems.append("the response carries no usage.completion_tokens")
    m = answer_metrics(o)
    return Outcome.failed(*problems, metrics=m) if problems else Outcome.passed(m)
