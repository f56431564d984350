"""Candidate settings owned by the context part of qualify."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from qualify.verdict import StrictModel

PositiveFloat = Annotated[float, Field(gt=0)]
PositiveInt = Annotated[int, Field(gt=0)]


class ContextSettings(StrictModel):
    targets: list[PositiveInt] = Field(default_factory=lambda: [32768, 65536, 131072])
    completion_margin: PositiveInt = 512
    max_tokens: PositiveInt = 64
    warmups: Annotated[int, Field(ge=2)] = 2
    content: list[Literal["prose", "list", "code"]] = Field(
        default_factory=lambda: list[Literal["prose", "list", "code"]](["prose"])
    )
    concurrency: list[PositiveInt] = Field(default_factory=lambda: [1])
    timeout_s: PositiveFloat = 900.0
    idle_wait_s: PositiveFloat = 60.0
