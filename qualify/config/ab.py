"""Candidate settings owned by the ab part of qualify."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from qualify.verdict import StrictModel

PositiveFloat = Annotated[float, Field(gt=0)]
PositiveInt = Annotated[int, Field(gt=0)]


class ABSettings(StrictModel):
    control: str | None = Field(default=None, description="path of the control file")
    runs: PositiveInt = 3
    max_tokens: PositiveInt = 256
    temperature: Annotated[float, Field(ge=0)] = 0.0
    seed: int | None = 1234
    prompts: str | None = None
    concurrency: list[PositiveInt] = Field(default_factory=lambda: [1])
    bootstrap_resamples: PositiveInt = 2000
    timeout_s: PositiveFloat = 300.0
