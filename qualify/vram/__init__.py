"""GPU telemetry: a background sampler of free memory and power, through every stage."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from qualify.registry import StageParts, StageSpec
from qualify.vram.settings import VramSettings

if TYPE_CHECKING:
    from qualify.candidate import LoadedCandidate
    from qualify.evidence.store import RunDir
    from qualify.vram.sampler import Sampler


def start_sampler(loaded: LoadedCandidate, run: RunDir) -> Sampler:
    """The sampler of this candidate's telemetry source (`select.choose`), started: it samples
    from the first `mark`, into the run's `telemetry/`."""
    from qualify.vram.select import choose
    from qualify.vram.series import SampleLog

    return choose(loaded.candidate.stages.vram, SampleLog(run)).start()


def plan_note(loaded: LoadedCandidate) -> str:
    """What the vram sampler would read (it sends nothing to the model server): `qualify run
    --plan`'s line for this stage."""
    from qualify.vram.prometheus import QUERY_PATH, query

    s = loaded.candidate.stages.vram
    parts = [f"source {s.source}, every {s.interval_ms} ms"]
    if s.source in ("auto", "nvml"):
        parts.append(f"NVML on this host (GPUs {s.gpus if s.gpus is not None else 'all'})")
    if s.source in ("auto", "dcgm") and s.dcgm_urls:
        parts.append("GET " + ", ".join(s.dcgm_urls))
    if s.source in ("auto", "prometheus") and s.prometheus_url:
        parts.append(
            f"GET {s.prometheus_url.rstrip('/')}{QUERY_PATH}?query={query(s.prometheus_selector)}"
        )
    return "telemetry: " + "; ".join(parts)


def parts() -> StageParts:
    from qualify.vram import judges, rebuild, record, section, stage, start_sampler

    return StageParts.of(
        stage.vram,
        record.Record,
        section,
        judges,
        rebuild=rebuild.rebuild,
        sampler=start_sampler,
        plan_note=plan_note,
    )


SPEC = StageSpec(
    "vram",
    parts,
    last=True,
    causes={"telemetry": "vram-reserve", "reserve*": "vram-reserve"},
    settings=VramSettings,
    partial=Path(__file__).with_name("section.md.j2"),
)
