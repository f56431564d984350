"""Output budgets that fit thinking models, and the reasoning-only completion named as such.

A gate's `max_tokens` is the budget of its *answer*; at a level that reasons, the request gets
that plus the level's reasoning allowance (`allowance`). Budgets meant to cut an answer short
(truncation, over-length) stay exact. A completion whose tokens all went to reasoning is not a
wrong answer: the gates that judge answers report it as `reasoning-only` and inconclusive, with
the budget it had; `soft-empty` is the gate that fails it.
"""

from __future__ import annotations

from collections.abc import Mapping

from qualify.gates.probe import GateContext
from qualify.gates.registry import Outcome
from qualify.httpclient.chat import ChatOutcome
from qualify.records import Verdict


def allowance(
    fields: Mapping[str, object], default: int, level: str, by_level: dict[str, int]
) -> tuple[int, str]:
    """The reasoning tokens a level's requests get on top of each answer budget, and why: the
    level's own thinking budget, none when it turns reasoning off, the candidate's
    `reasoning_tokens_at.<level>`, `reasoning_tokens` when the level asks for reasoning (an
    effort, or the template switch on), none for a level that says nothing of reasoning."""
    for key in ("thinking_token_budget", "thinking_budget_tokens"):
        if isinstance(budget := fields.get(key), int):
            return int(budget), f"the level's {key}"
    kwargs = fields.get("chat_template_kwargs")
    kwargs = kwargs if isinstance(kwargs, Mapping) else {}
    switch = [kwargs.get(k) for k in ("enable_thinking", "thinking")]
    effort = fields.get("reasoning_effort")
    if str(effort or "").lower() == "none" or any(v is False for v in switch):
        return 0, "the level turns reasoning off"
    if level in by_level:
        return by_level[level], f"stages.preflight.reasoning_tokens_at.{level}"
    if not effort and not any(v is True for v in switch):
        return 0, "the level asks for no reasoning"
    return default, "stages.preflight.reasoning_tokens"


def answer_budget(ctx: GateContext, n: int | None) -> int:
    """`max_tokens` for a request whose answer needs `n` tokens (the context's default when
    None), with the level's reasoning allowance added."""
    return (n or ctx.max_tokens) + ctx.reasoning_tokens


def reasoning_only(o: ChatOutcome, ctx: GateContext, what: str) -> Outcome | None:
    """`inconclusive`, named reasoning-only, when the completion is reasoning and nothing else;
    None when it has visible content, a tool call, or no reasoning either."""
    if o.content.strip() or o.tool_calls or not o.reasoning.strip():
        return None
    allowed, src = ctx.reasoning_tokens, ctx.reasoning_source or "no reasoning allowance"
    spent = o.completion_tokens
    if o.finish_reason == "length":
        how = (
            f"the budget was exhausted in reasoning ({spent} completion tokens; "
            f"{allowed} of them allowed for reasoning, from {src})"
        )
    else:
        how = (
            f"the answer ended inside reasoning (finish_reason={o.finish_reason}, {spent} "
            "completion tokens): the reasoning parser found no end of reasoning"
        )
    return Outcome(
        Verdict.INCONCLUSIVE,
        [f"{what}: reasoning-only completion, no visible answer to judge: {how}"],
        {
            "reasoning_only": True,
            "finish_reason": o.finish_reason,
            "completion_tokens": spent,
            "reasoning_chars": len(o.reasoning),
            "reasoning_allowance": allowed,
        },
    )
