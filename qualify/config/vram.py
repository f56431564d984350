"""Candidate settings owned by the vram part of qualify."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from qualify.verdict import StrictModel

PositiveFloat = Annotated[float, Field(gt=0)]
PositiveInt = Annotated[int, Field(gt=0)]


class VramSettings(StrictModel):
    source: Literal["auto", "nvml", "nvidia-smi", "dcgm", "none"] = "auto"
    interval_ms: PositiveInt = 250
    dcgm_urls: list[str] = Field(default_factory=list)
    gpus: list[int] | None = None
