"""recall: a conversation of several turns; the answer names the value only one earlier turn
holds, and none of the values the other turns hold."""

from __future__ import annotations

import re

from pydantic import Field, model_validator

from qualify.gates.registry import Outcome, check
from qualify.quality.tasks import QualityContext, TaskParams, ask, shown


class RecallParams(TaskParams):
    expect: str = Field(min_length=1, description="the value the asked-about turn holds")
    other_turns: list[str] = Field(
        min_length=1, description="values other turns hold: naming one is recalling the wrong turn"
    )

    @model_validator(mode="after")
    def _held_by_turns(self) -> RecallParams:
        if self.turns is None or len(self.turns) < 3:
            raise ValueError("expected turns (at least three): recall needs earlier turns")
        earlier = "\n".join(t.content for t in self.turns[:-1])
        for value in [self.expect, *self.other_turns]:
            if not names(earlier, value):
                raise ValueError(f"expected {value!r} to be said in an earlier turn")
        return self


def names(text: str, value: str) -> bool:
    """True when `text` names `value` as a whole token (case-insensitive)."""
    return re.search(rf"(?<![\w-]){re.escape(value)}(?![\w-])", text, re.IGNORECASE) is not None


@check("recall", RecallParams, "quality")
async def recall(ctx: QualityContext, p: RecallParams) -> Outcome:
    """Pass when the last question is answered with the value only an earlier turn holds."""
    asked = await ask(ctx, p, "recall")
    if asked.outcome is not None:
        return asked.outcome
    text = asked.answer
    wrong = [v for v in p.other_turns if names(text, v)]
    right = names(text, p.expect)
    if wrong and not right:
        return asked.wrong(f"recalled {wrong[0]!r}, a value from another turn, not {p.expect!r}")
    if wrong:
        return asked.wrong(
            f"names {p.expect!r} but also {wrong[0]!r}, a value from another turn: "
            "the answer must name one"
        )
    if not right:
        return asked.wrong(f"does not name {p.expect!r}: {shown(text)}")
    return asked.passed()
