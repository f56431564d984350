"""Candidate settings owned by the ab part of qualify."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from qualify.records import StrictModel

PositiveFloat = Annotated[float, Field(gt=0)]
PositiveInt = Annotated[int, Field(gt=0)]


class ABSettings(StrictModel):
    """The paired A/B: the same prompts, budget, sampling and timing boundaries in both lanes."""

    control: str | None = Field(default=None, description="path of the control file")
    # Two runs is the least that gives a run-to-run spread, so a noise label.
    runs: Annotated[int, Field(ge=2)] = 3
    max_tokens: PositiveInt = 256
    temperature: Annotated[float, Field(ge=0)] = 0.0
    seed: int | None = 1234
    prompts: str | None = Field(
        default=None, description="prompt file (YAML); the shipped task prompts when unset"
    )
    level: str | None = Field(
        default=None, description="reasoning level whose fields every request carries"
    )
    concurrency: PositiveInt = 1
    warmups: Annotated[int, Field(ge=0)] = 2
    nonce: bool = Field(default=True, description="a unique first line in every request")
    bootstrap_resamples: PositiveInt = 2000
    idle_wait_s: PositiveFloat = 30.0
    timeout_s: PositiveFloat = 300.0
