"""garble: leaked markup, special tokens, runs of one character or script drift fail."""

from __future__ import annotations

from pydantic import Field

from qualify.gates.files import Params
from qualify.gates.probe import GateContext
from qualify.gates.registry import Outcome, check
from qualify.preflight.budget import answer_budget, reasoning_only
from qualify.preflight.checks.common import answer_metrics, chat_problem, pick, user
from qualify.preflight.checks.text import garble as find_garble
from qualify.records import Verdict


class GarbleParams(Params):
    prompts: list[str] = Field(min_length=1, description="attempt n uses prompt n (cycling)")
    max_tokens: int | None = Field(default=None, gt=0)
    run_limit: int = Field(default=18, ge=2, description="this many of one character fails")
    script: str = Field(default="LATIN", description="the expected script (a Unicode name prefix)")
    max_foreign_share: float = Field(default=0.2, ge=0, le=1)


@check("garble", params=GarbleParams)
async def garble(ctx: GateContext, p: GarbleParams) -> Outcome:
    """Pass when the visible answer is clean text in the expected script."""
    prompt: str = pick(p.prompts, ctx.attempt)
    o = await ctx.chat(
        "garble", ctx.body([user(prompt)], max_tokens=answer_budget(ctx, p.max_tokens))
    )
    if bad := chat_problem(o, "garble request") or reasoning_only(o, ctx, "garble"):
        return bad
    m = answer_metrics(o)
    if not o.content.strip():
        why = f"no visible text to judge (finish_reason={o.finish_reason}; see soft-empty)"
        return Outcome(Verdict.INCONCLUSIVE, [why], m)
    problems = find_garble(o.content, p.run_limit, p.script, p.max_foreign_share)
    return Outcome.failed(*problems, metrics=m) if problems else Outcome.passed(m)
