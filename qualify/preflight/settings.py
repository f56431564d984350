"""Candidate settings owned by the preflight part of qualify."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from qualify.records import StrictModel


class PreflightSettings(StrictModel):
    gates: list[str] = Field(
        default_factory=list, description="gate ids from the gates directory; empty means all"
    )
    gates_dir: str | None = Field(
        default=None,
        description="gate files, relative to the candidate file; default: the project's gates/",
    )
    max_tokens: Annotated[int, Field(gt=0)] = Field(
        default=256, description="output budget of a request, unless its gate sets one"
    )
    reasoning_tokens: Annotated[int, Field(ge=0)] = Field(
        default=2048,
        description="reasoning allowance added to each answer budget at a level that asks for "
        "reasoning and sets no thinking budget of its own (qualify.preflight.budget)",
    )
    reasoning_tokens_at: dict[str, Annotated[int, Field(ge=0)]] = Field(
        default_factory=dict, description="the allowance per reasoning level, over the default"
    )
    timeout_s: float = Field(default=120.0, gt=0, description="bound on each request")
    temperature: Annotated[float, Field(ge=0)] | None = Field(
        default=0.0, description="sent with every request; none leaves the server's default"
    )
