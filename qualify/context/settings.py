"""Candidate settings owned by the context part of qualify."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, model_validator

from qualify.context.corpus import Kind
from qualify.context.tasks import TASK_KINDS, TaskKind
from qualify.records import StrictModel

PositiveFloat = Annotated[float, Field(gt=0)]
PositiveInt = Annotated[int, Field(gt=0)]


class ContextSettings(StrictModel):
    """The context ladder: prompt sizes, what they are made of, and how they are sent."""

    targets: list[PositiveInt] = Field(
        default_factory=lambda: [32768, 65536, 131072],
        min_length=1,
        description="prompt sizes in tokens; each is clamped to the window minus the margin",
    )
    completion_margin: PositiveInt = Field(
        512, description="tokens kept free for the answer; at least max_tokens"
    )
    max_tokens: PositiveInt = 64
    warmups: Annotated[int, Field(ge=2)] = 2
    content: list[Kind] = Field(default_factory=lambda: list[Kind](["prose"]), min_length=1)
    concurrency: list[PositiveInt] = Field(default_factory=lambda: [1], min_length=1)
    timeout_s: PositiveFloat = 900.0
    idle_wait_s: PositiveFloat = 60.0
    level: str | None = Field(
        None, description="reasoning level whose request fields the ladder sends (default: first)"
    )
    max_tokenizer_counts: Annotated[int, Field(ge=2, le=32)] = Field(
        8, description="most prompt counts spent sizing one rung"
    )
    tasks: list[TaskKind] = Field(
        default_factory=lambda: list(TASK_KINDS),
        description="RULER-style task kinds hidden in every rung's document (none: needles only)",
    )
    task_max_tokens: PositiveInt = Field(
        32, description="answer budget of a task asked on its own (a few codes, names or words)"
    )
    tool_battery: bool = Field(
        True, description="ask typed, streamed and tool-result calls at the deepest rung"
    )
    battery_max_tokens: PositiveInt = Field(
        96, description="answer budget of the tool battery's requests; at most the margin"
    )

    @model_validator(mode="after")
    def _consistent(self) -> ContextSettings:
        if self.completion_margin < self.max_tokens:
            raise ValueError(
                f"completion_margin ({self.completion_margin}) must be at least "
                f"max_tokens ({self.max_tokens}), or the answer would not fit the window"
            )
        if self.tool_battery and self.battery_max_tokens > self.completion_margin:
            raise ValueError(
                f"battery_max_tokens ({self.battery_max_tokens}) must be at most "
                f"completion_margin ({self.completion_margin}), or the tool call would not fit"
            )
        for name in ("targets", "content", "concurrency", "tasks"):
            values = getattr(self, name)
            if len(set(values)) != len(values):
                raise ValueError(f"{name} lists a value twice ({values}); expected distinct values")
        return self
