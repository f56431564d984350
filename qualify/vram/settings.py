"""Candidate settings owned by the vram part of qualify (`[stages.vram]`).

The reserve itself is the house's (`Thresholds.vram_reserve_gib`); these say where telemetry
comes from.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from qualify.records import StrictModel

Url = Annotated[str, Field(pattern=r"^https?://[^\s/]+")]


class VramSettings(StrictModel):
    source: Literal["auto", "nvml", "dcgm", "prometheus", "none"] = Field(
        default="auto",
        description="auto: NVML, else dcgm_urls, else prometheus_url, else no telemetry",
    )
    interval_ms: Annotated[int, Field(ge=10, le=10_000)] = Field(
        default=250, description="sampling period; a gap is an interval over twice this"
    )
    dcgm_urls: list[Url] = Field(
        default_factory=list,
        description="dcgm-exporter /metrics URLs of GPUs on other hosts",
    )
    prometheus_url: Url | None = Field(
        default=None,
        description="a Prometheus server scraping dcgm-exporter on every node (cluster telemetry)",
    )
    prometheus_selector: str = Field(
        default="",
        pattern=r"^[^{}]*$",
        description='PromQL label matchers narrowing the GPUs, e.g. Hostname=~"node-a|node-b"',
    )
    gpus: list[Annotated[int, Field(ge=0)]] | None = Field(
        default=None, description="local GPU indexes to watch (NVML); all if unset"
    )

    @model_validator(mode="after")
    def _dcgm_needs_urls(self) -> VramSettings:
        if self.source == "dcgm" and not self.dcgm_urls:
            raise ValueError('source "dcgm" needs dcgm_urls (expected at least one URL)')
        if self.source == "prometheus" and not self.prometheus_url:
            raise ValueError('source "prometheus" needs prometheus_url (expected a URL)')
        return self
