"""The vram stage's `qualify diff` cells (its spec's `cells`):
per card and stage, the lowest free memory."""

from __future__ import annotations

from qualify.present.cells import Cell, Measure, nums
from qualify.vram.record import Record


def cells(rec: Record) -> list[Cell]:
    """Per card and stage: the lowest free memory seen (one reading per run)."""
    out: list[Cell] = []
    for card in rec.cards:
        setting = {"name": card.name, "total_mib": card.total_mib}
        for stage, s in sorted(card.stages.items()):
            c = Cell("vram", f"gpu {card.gpu} {stage}", setting)
            c.measures["min_free_mib"] = Measure("MiB", "higher", nums([s.min_free_mib]))
            out.append(c)
    return out
