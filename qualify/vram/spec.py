"""The vram stage, declared: what the registry and the rest of qualify read of it."""

from __future__ import annotations

from pathlib import Path

from qualify.registry import StageParts, StageSpec
from qualify.vram.settings import VramSettings


def parts() -> StageParts:
    from qualify.vram import cells, judges, rebuild, record, section, stage, start_sampler

    return StageParts(
        run=stage.vram,
        record=record.Record,
        judges=(judges,),
        rebuild=rebuild.rebuild,
        section=section.section,
        figures=section.figures,
        cells=cells.cells,
        plots=section.plots,
        sampler=start_sampler,
    )


SPEC = StageSpec(
    "vram",
    parts,
    last=True,
    causes={"telemetry": "vram-reserve", "reserve*": "vram-reserve"},
    settings=VramSettings,
    partial=Path(__file__).with_name("section.md.j2"),
)
