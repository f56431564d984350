"""Choosing the telemetry source the candidate asks for (`stages.vram.source`).

`auto` takes NVML if it initialises, else the DCGM URLs if any are given, else the Prometheus
server if one is named (`qualify.vram.prometheus`), else none; every
source tried and why it failed is kept, so "no telemetry" always says what was looked for.
(There is no nvidia-smi source: it reads the same NVML library, so it works exactly where NVML
does; see docs/gpu-sampler.md.)
"""

from __future__ import annotations

from dataclasses import dataclass, field

from qualify.vram.dcgm import DcgmSource, DcgmUnavailable
from qualify.vram.nvml import NvmlSource, NvmlUnavailable
from qualify.vram.prometheus import PrometheusSource, PrometheusUnavailable
from qualify.vram.sampler import Source
from qualify.vram.settings import VramSettings


@dataclass
class Choice:
    source: Source | None
    tried: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def why_none(self) -> str | None:
        return None if self.source else "; ".join(self.tried) or "no source was tried"


def choose(s: VramSettings) -> Choice:
    """The first source of `s.source` (or of auto's order) that opens."""
    if s.source == "none":
        return Choice(None, ['stages.vram.source is "none"'])
    order = ["nvml", "dcgm", "prometheus"] if s.source == "auto" else [s.source]
    choice = Choice(None)
    for name in order:
        try:
            if name == "nvml":
                choice.source = NvmlSource(s.gpus)
            elif name == "prometheus":
                if not s.prometheus_url:
                    choice.tried.append("prometheus: stages.vram.prometheus_url is not set")
                else:
                    url, selector = s.prometheus_url, s.prometheus_selector
                    choice.source = PrometheusSource(url, s.interval_ms, selector)
            elif not s.dcgm_urls:
                choice.tried.append("DCGM: stages.vram.dcgm_urls is empty")
            else:
                dcgm = DcgmSource(s.dcgm_urls, s.interval_ms)
                choice.source, choice.problems = dcgm, dcgm.problems
        except (NvmlUnavailable, DcgmUnavailable, PrometheusUnavailable) as exc:
            choice.tried.append(f"{name}: {exc}")
        if choice.source is not None:
            return choice
    return choice
