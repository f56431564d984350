"""The incumbent at the candidate's edge: the incumbent's lane repeats the candidate's open-loop
steps at its knee and the first rate over it, with the same requests and Poisson arrivals (the
stage's seed plus the step's index in the search). One step per lane and rate is a lead for the
reader, never a verdict (docs/capacity.md, "The incumbent at the candidate's edge")."""

from __future__ import annotations

from typing import TYPE_CHECKING

from qualify.capacity.knee import holds, open_cell, step_size
from qualify.capacity.loads import Edge, Knee, Load, OpenCell
from qualify.capacity.openloop import poisson
from qualify.capacity.parts import plan_lengths

if TYPE_CHECKING:
    from qualify.capacity.stage import Capacity, Lane
    from qualify.progress import Task

PREFIX = "incumbent-"


def edge_steps(cells: list[OpenCell], knee: Knee | None) -> list[tuple[float, int]]:
    """(rate, index of its step among the candidate's Poisson steps, which gives its seed) for
    the knee and the first rate over it; empty without a knee search."""
    if knee is None:
        return []
    steps = [c for c in cells if c.arrival == "poisson"]
    out: list[tuple[float, int]] = []
    at_knee = [i for i, c in enumerate(steps) if c.cell == knee.cell]
    if knee.rate_rps is not None and at_knee:
        out.append((float(knee.rate_rps), at_knee[-1]))
    over = [i for i, c in enumerate(steps) if c.rate_rps == knee.first_over]
    if knee.first_over is not None and over:
        out.append((float(knee.first_over), over[-1]))
    return out


async def incumbent_edge(cap: Capacity, lane: Lane, load: Load, task: Task) -> Edge:
    """The incumbent's steps at the candidate's edge (`load` is the candidate's search)."""
    s = cap.s
    steps = edge_steps(load.cells, load.knee)
    if not steps:
        why = "the candidate's knee search ran no step to repeat"
        return Edge(status="not run", why=load.error or why, cells=[])
    length = load.length
    planned = (
        plan_lengths([length.planned_tokens], lane.window, s.max_tokens)[0] if length else None
    )
    if planned is None or planned.errors or planned.clamped:
        why = f"the incumbent's window ({lane.window} tokens) cannot repeat the candidate's prompts"
        return Edge(status="not run", why=why, cells=[])
    n = planned.planned_tokens
    p = await cap.prompts(lane, s.load.kind, n, f"load-{lane.name}-{n}")
    drain = float(cap.slo.e2e_s or s.load.step_s) + s.load.drain_s
    cells: list[OpenCell] = []
    for rate, k in steps:
        c = await open_cell(
            lane.sender,
            p.fresh,
            poisson(rate, step_size(rate, s.load), cap.seed + k),
            label=f"load-{PREFIX}poisson-{rate:.4g}rps",
            kind=s.load.kind,
            max_tokens=s.max_tokens,
            slo=cap.slo,
            lag_bound_ms=cap.ctx.thresholds.client_max_lag_ms,
            drain_s=drain,
            meter=cap.meter,
        )
        c.update(
            arrival="poisson", rate_rps=rate, cell=f"{PREFIX}poisson-{rate:.4g}rps", step=k + 1
        )
        cells.append(cell := OpenCell.model_validate(c))
        task.advance(
            note=f"capacity incumbent at {rate:.3g} req/s: goodput {cell.good}/{cell.requests}"
        )
    return Edge(status="measured", why=None, cells=cells)


def held(c: OpenCell | None, floor: float) -> bool:
    """A lane's step held the rate: goodput at the floor, at pace, no harness error."""
    return c is not None and holds(c, floor) and not c.harness_error


def versus(
    candidate: list[OpenCell], incumbent: list[OpenCell], floor: float
) -> list[tuple[OpenCell | None, OpenCell, str | None]]:
    """Per rate the incumbent ran: the candidate's step at that rate, the incumbent's, and a
    lead naming a rate one lane held and the other did not."""
    rows = []
    for inc in incumbent:
        same = [c for c in candidate if c.step == inc.step and c.arrival == "poisson"]
        cand = same[-1] if same else None
        c_held, i_held = held(cand, floor), held(inc, floor)
        lead = (
            "the incumbent held a rate the candidate did not"
            if i_held and not c_held
            else "the candidate held a rate the incumbent did not"
            if c_held and not i_held
            else None
        )
        rows.append((cand, inc, lead))
    return rows
