"""What every quality task shares: its prompt or turns, its budgets, how it is asked, and how
an answer is classified before its check judges it.

A task is a gate file of stage `quality`. Its check is a probe of stage `quality` (`check`);
the probe calls `ask`, which sends the task with the level's request fields and the task's
budget (visible plus reasoning tokens, times the candidate's `budget_scale`), keeps the
exchange, and turns a broken exchange or an answer cut by the budget into an outcome of its own,
so that only complete answers reach the check. Every outcome carries `metrics["outcome"]`:
`pass`, `wrong`, `cut` (finish_reason=length: the budget ran out) or `error` (the harness or the
transport failed, nothing was judged).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from qualify.gates.files import Params
from qualify.gates.probe import GateContext
from qualify.gates.registry import Outcome
from qualify.httpclient.chat import ChatOutcome
from qualify.httpclient.degenerate import degenerate
from qualify.preflight.checks.common import answer_metrics, chat_problem, clip
from qualify.quality.sandbox import RunResult, run_python
from qualify.records import Verdict

RunCode = Callable[[Path, Path, float], RunResult]
MIN_VISIBLE = 16


@dataclass
class QualityContext(GateContext):
    """A gate context with the candidate's budget scale and the lane the task runs on."""

    budget_scale: float = 1.0
    lane: str = "candidate"
    # How a task's code is run: in the sandbox (`qualify.quality.sandbox.run_python`); `verify`
    # hands the runs the attempt recorded instead, never running model-written code itself.
    run_code: RunCode = run_python


class Turn(Params):
    role: Literal["system", "user", "assistant"]
    content: str = Field(min_length=1)


class TaskParams(Params):
    """The part of every task's params that says what is asked and with what budget."""

    prompt: str | None = Field(default=None, description="a single user message")
    turns: list[Turn] | None = Field(
        default=None, description="a conversation; the last turn must be the user's question"
    )
    visible_tokens: int = Field(gt=0, le=32768, description="budget of the visible answer")
    reasoning_tokens: int = Field(
        ge=0, le=65536, description="headroom for reasoning, added to the request's max_tokens"
    )

    @model_validator(mode="after")
    def _one_question(self) -> TaskParams:
        if (self.prompt is None) == (self.turns is None):
            raise ValueError("expected exactly one of prompt or turns")
        if self.turns is not None and self.turns[-1].role != "user":
            raise ValueError("expected the last of turns to be the user's question")
        return self


@dataclass(frozen=True)
class Budget:
    visible: int
    reasoning: int

    @property
    def max_tokens(self) -> int:
        return self.visible + self.reasoning


def budget(p: TaskParams, scale: float) -> Budget:
    """The task's budgets times the scale; the visible budget never drops below 16 tokens."""
    return Budget(
        max(MIN_VISIBLE, round(p.visible_tokens * scale)), round(p.reasoning_tokens * scale)
    )


@dataclass
class Asked:
    """A task's answer: complete (`answer` set) or already decided (`outcome` set)."""

    reply: ChatOutcome
    metrics: dict[str, object]
    outcome: Outcome | None = None

    @property
    def answer(self) -> str:
        return self.reply.content

    def passed(self, **extra: object) -> Outcome:
        return Outcome.passed({**self.metrics, **extra, "outcome": "pass"})

    def wrong(self, *reasons: str, **extra: object) -> Outcome:
        metrics = {**self.metrics, **extra, "outcome": "wrong"}
        if why := degenerate(self.reply.content):
            metrics["degenerate"] = why
        return Outcome.failed(*reasons, metrics=metrics)


async def ask(
    ctx: QualityContext,
    p: TaskParams,
    label: str,
    extra: str = "",
    visible: bool = True,
    **fields: object,
) -> Asked:
    """Send the task; a broken exchange is `error`, an answer cut by the budget is `cut`, and
    (`visible`) an answer with nothing visible and no tool call is `wrong`."""
    b = budget(p, ctx.budget_scale)
    msgs = [{"role": t.role, "content": t.content} for t in p.turns or []]
    msgs = msgs or [{"role": "user", "content": p.prompt or ""}]
    if extra:  # what a task shows (files) follows the question
        msgs[-1] = {**msgs[-1], "content": f"{msgs[-1]['content']}\n\n{extra}"}
    body = ctx.body(msgs, max_tokens=b.max_tokens, **fields)
    reply = await ctx.chat(label, body)
    metrics = {
        **answer_metrics(reply),
        "lane": ctx.lane,
        "visible_budget": b.visible,
        "reasoning_budget": b.reasoning,
        "max_tokens": b.max_tokens,
    }
    asked = Asked(reply, metrics)
    if bad := chat_problem(reply, f"{ctx.gate} request"):
        kind = "error" if bad.verdict is Verdict.ERROR else "wrong"
        bad.metrics = {**metrics, "outcome": kind}
        asked.outcome = bad
    elif reply.finish_reason == "length":
        used = reply.completion_tokens
        asked.outcome = Outcome.failed(
            f"cut by the budget: finish_reason=length after {used if used is not None else '?'} "
            f"tokens (budget {b.visible} visible + {b.reasoning} reasoning tokens; "
            f"{len(reply.content)} visible characters, {len(reply.reasoning)} of reasoning)",
            metrics={**metrics, "outcome": "cut"},
        )
    elif visible and not (reply.content.strip() or reply.tool_calls):
        asked.outcome = asked.wrong(
            f"no visible answer (finish_reason={reply.finish_reason}, "
            f"{len(reply.reasoning)} characters of reasoning only)"
        )
    return asked


_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)


def fenced(text: str, langs: tuple[str, ...]) -> str | None:
    """The first fenced block tagged with one of `langs`, else the first untagged one."""
    blocks = [(m.group(1).lower(), m.group(2)) for m in _FENCE.finditer(text)]
    for lang, body in blocks:
        if lang in langs:
            return body
    for lang, body in blocks:
        if not lang:
            return body
    return None


def shown(text: str, n: int = 100) -> str:
    return repr(clip(text.strip(), n))
