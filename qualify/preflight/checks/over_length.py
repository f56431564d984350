"""over-length: a prompt over the window gets a 4xx naming the limit; the server stays up."""

from __future__ import annotations

import re

from pydantic import Field

from qualify.gates.files import Params
from qualify.gates.probe import GateContext
from qualify.gates.registry import Outcome, check
from qualify.httpclient.chat import ChatOutcome
from qualify.httpclient.client import error_message
from qualify.preflight.checks.common import chat_problem, clip, user
from qualify.records import Verdict

# Varied sentences: a repeated word would tokenize into a degenerate, unrepresentative prompt.
SUBJECTS = ("The ferry", "A surveyor", "The archive", "Our neighbour", "The orchard", "A clerk")
VERBS = ("counted", "mapped", "repaired", "described", "weighed", "carried")
OBJECTS = ("lanterns", "granite steps", "tide tables", "copper pipes", "old ledgers", "reed mats")


class OverLengthParams(Params):
    overshoot: float = Field(default=1.3, ge=1.05, le=4, description="prompt size / window")
    follow_up: str = Field(min_length=1, description="the normal request sent afterwards")
    max_tokens: int = Field(default=8, gt=0)


def long_text(tokens: int) -> str:
    """Prose of at least about `tokens` tokens (four characters a token, rounded up)."""
    parts, size, i = [], 0, 0
    while size < tokens * 4:
        s = f"{SUBJECTS[i % 6]} {VERBS[(i // 6) % 6]} {i * 7 + 3} {OBJECTS[(i // 36) % 6]}. "
        parts.append(s)
        size += len(s)
        i += 1
    return "".join(parts)


def names_limit(o: ChatOutcome, window: int) -> bool:
    """True when the error names the context limit: in its message or in a field."""
    body = o.raw_body if isinstance(o.raw_body, dict) else {}
    err = body.get("error") if isinstance(body.get("error"), dict) else body
    if isinstance(err, dict) and isinstance(err.get("n_ctx"), int):
        return True
    msg, _ = error_message(o.raw_body)
    return str(window) in re.findall(r"\d+", msg or "")


def judge_rejection(o: ChatOutcome, window: int) -> Outcome | None:
    status = o.http_status
    msg, typ = error_message(o.raw_body)
    shown = clip(f"{msg} ({typ})" if typ else str(msg), 200)
    if status is not None and 200 <= status < 300:
        return Outcome.failed(
            f"a prompt over the {window}-token window was accepted (HTTP {status}, "
            f"usage.prompt_tokens={o.prompt_tokens}), expected a 4xx"
        )
    if status is not None and status >= 500:
        return Outcome.failed(f"expected a 4xx naming the limit, got HTTP {status}: {shown}")
    if status is not None and not names_limit(o, window):
        return Outcome.failed(f"HTTP {status} does not name the {window}-token limit: {shown}")
    return None


@check("over_length", params=OverLengthParams)
async def over_length(ctx: GateContext, p: OverLengthParams) -> Outcome:
    """Pass on a 4xx naming the window, then a normal answer to the next request."""
    if ctx.window is None:
        return Outcome(Verdict.INCONCLUSIVE, ["the context window is unknown"])
    prompt = long_text(int(ctx.window * p.overshoot))
    o = await ctx.chat("over-length", ctx.body([user(prompt)], max_tokens=p.max_tokens))
    if o.error_kind in ("connect", "timeout", "transport"):
        return Outcome.errored(f"over-length request: {o.error}")
    metrics: dict[str, object] = {
        "window": ctx.window,
        "http_status": o.http_status,
        "prompt_chars": len(prompt),
    }
    if o.http_status is not None and (bad := judge_rejection(o, ctx.window)):
        bad.metrics = metrics
        return bad
    after = await ctx.chat("after-over-length", ctx.body([user(p.follow_up)], max_tokens=8))
    metrics["follow_up_status"] = after.http_status
    if (bad := chat_problem(after, "the normal request after it")) is not None:
        return Outcome.failed(f"the server did not stay healthy: {bad.reasons[0]}", metrics=metrics)
    if o.http_status is None:
        # The connection dropped on the long prompt: no clear 4xx, even if the server recovered.
        return Outcome.failed(f"over-length request: {o.error}, expected a 4xx", metrics=metrics)
    return Outcome.passed(metrics)
