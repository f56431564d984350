"""The base of every part of the capacity record (`qualify.capacity.record`), and the parts
both the closed-loop matrix and the open-loop load write: energy, planned lengths (the idle
checks are `qualify.serving.idle.Idle`, as the context record's)."""

from __future__ import annotations

from pydantic import Field

# Every part of the record writes only the fields it was given.
from qualify.records import Written as Part

__all__ = ["Part"]


class CardEnergy(Part):
    joules: float | None = None
    why: str | None = None


class Energy(Part):
    """Energy over a window (`qualify.vram.energy.window_energy`) or over a cell's runs
    (`qualify.capacity.matrix.cell_energy`); `joules` None means unmeasured, `why` says why."""

    joules: float | None = None
    mean_power_w: float | None = None
    power_field: str | None = None
    why: str | None = None
    cards: dict[str, CardEnergy] = Field(default_factory=dict)
    window_s: float | None = None
    j_per_output_token: float | None = None
    completion_tokens: int | None = None


class PlannedLength(Part):
    """A target prompt length clamped to the window (`plan_lengths`)."""

    target: int
    planned_tokens: int
    clamped: bool = False
    same_as: int | None = None
    errors: list[str] = Field(default_factory=list)
    sized_tokens: int | None = None


def plan_lengths(targets: list[int], window: int, max_tokens: int) -> list[PlannedLength]:
    """Targets clamped to the window minus the budget; a repeat names the first (`same_as`)."""
    room = window - max_tokens
    out: list[PlannedLength] = []
    for t in targets:
        planned = min(t, room)
        first = next((r for r in out if r.planned_tokens == planned and not r.same_as), None)
        out.append(
            PlannedLength(
                target=t,
                planned_tokens=planned,
                clamped=t > room,
                same_as=first.target if first else None,
                errors=[] if planned > 0 else [f"window {window} leaves no room for a prompt"],
            )
        )
    return out
