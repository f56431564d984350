"""Choosing the telemetry source the candidate asks for (`stages.vram.source`).

`auto` takes NVML if it initialises, else the DCGM URLs if any are given, else the Prometheus
server if one is named (`qualify.vram.prometheus`), else none; every
source tried and why it failed is kept, so "no telemetry" always says what was looked for.
(There is no nvidia-smi source: it reads the same NVML library, so it works exactly where NVML
does; see docs/gpu-sampler.md.)
"""

from __future__ import annotations

from qualify.vram.dcgm import DcgmSource, DcgmUnavailable
from qualify.vram.nvml import NvmlSource, NvmlUnavailable
from qualify.vram.prometheus import PrometheusSource, PrometheusUnavailable
from qualify.vram.sampler import Sampler
from qualify.vram.series import SampleLog
from qualify.vram.settings import VramSettings


def choose(s: VramSettings, log: SampleLog | None = None) -> Sampler:
    """A sampler of the first source of `s.source` (or of auto's order) that opens, else one
    that samples nothing and says which sources were tried and why each gave no telemetry."""
    if s.source == "none":
        return Sampler(None, s.interval_ms, 'stages.vram.source is "none"', log=log)
    tried = []
    for name in ["nvml", "dcgm", "prometheus"] if s.source == "auto" else [s.source]:
        try:
            if name == "nvml":
                return Sampler(NvmlSource(s.gpus), s.interval_ms, log=log)
            if name == "prometheus" and s.prometheus_url:
                src = PrometheusSource(s.prometheus_url, s.interval_ms, s.prometheus_selector)
                return Sampler(src, s.interval_ms, log=log)
            if name == "dcgm" and s.dcgm_urls:
                dcgm = DcgmSource(s.dcgm_urls, s.interval_ms)
                return Sampler(dcgm, s.interval_ms, problems=dcgm.problems, log=log)
            tried.append(
                "prometheus: stages.vram.prometheus_url is not set"
                if name == "prometheus"
                else "DCGM: stages.vram.dcgm_urls is empty"
            )
        except (NvmlUnavailable, DcgmUnavailable, PrometheusUnavailable) as exc:
            tried.append(f"{name}: {exc}")
    return Sampler(None, s.interval_ms, "; ".join(tried), log=log)
