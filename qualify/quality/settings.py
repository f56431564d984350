"""Candidate settings owned by the quality stage."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from qualify.records import StrictModel

PositiveFloat = Annotated[float, Field(gt=0)]


class QualitySettings(StrictModel):
    tasks: list[str] = Field(
        default_factory=list, description="task ids from gates/quality/; empty means all"
    )
    budget_scale: Annotated[float, Field(gt=0, le=4)] = Field(
        default=1.0,
        description="multiplies every task's visible and reasoning budgets (a small demo model "
        "gets small budgets); the scaled budgets are printed and recorded",
    )
    control: bool = Field(
        default=True,
        description="when the run has a control lane, run the lowest reasoning level of "
        "preflight and the quality suite on it too",
    )
    timeout_s: PositiveFloat = Field(default=300.0, description="bound on each request")
    temperature: Annotated[float, Field(ge=0)] | None = Field(
        default=0.0, description="sent with every request; none leaves the server's default"
    )
