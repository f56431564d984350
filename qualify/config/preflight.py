"""Candidate settings owned by the preflight part of qualify."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from qualify.verdict import StrictModel

PositiveFloat = Annotated[float, Field(gt=0)]
PositiveInt = Annotated[int, Field(gt=0)]


class PreflightSettings(StrictModel):
    gates: list[str] = Field(
        default_factory=list, description="gate ids from the gates directory; empty means all"
    )
    gates_dir: str | None = None
    max_tokens: PositiveInt = 256
    timeout_s: PositiveFloat = 120.0
