"""Open-loop load cells and the knee search: the highest rate the recipe serves within its SLOs.

A cell holds when its goodput is at the floor and the server kept pace (`KEEP_PACE`); why pace,
and how the search stops: docs/capacity.md, "The knee search, and how it stops".
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NotRequired, TypedDict, Unpack

from qualify.capacity.loads import Knee, LoadStream, OpenCell
from qualify.capacity.openloop import OpenLoopRun, Plan, harness_lag, poisson, send
from qualify.capacity.runs import Meter as Meter
from qualify.capacity.runs import StreamRec, stream_record
from qualify.capacity.settings import LoadSettings
from qualify.capacity.slo import Slo, goodput, misses, number, shown
from qualify.capacity.spread import Send, annotate, chosen, shard_name
from qualify.capacity.trace import TraceRow, arrivals
from qualify.httpclient.client import Exchange
from qualify.httpclient.load import Messages
from qualify.serving.idle import wait_idle
from qualify.serving.sender import Sender

Fresh = Callable[[], Awaitable[Messages]]
KEEP_PACE = 0.9  # the least share of the offered rate a held cell must serve (`pace`)


def pace(streams: Sequence[Mapping[str, object]]) -> float | None:
    """Served over offered rate: `1 / slope` of completion (send + E2E) against send time over
    the answered requests; None under 3 answered or all sent at once (a burst)."""
    sent = [
        (planned + (number(s.get("lag_ms")) or 0.0) / 1000.0, float(e2e))
        for s in streams
        if (e2e := number(s.get("e2e_s"))) is not None
        and (planned := number(s.get("planned_s"))) is not None
    ]
    if len(sent) < 3:
        return None
    mx = sum(x for x, _ in sent) / len(sent)
    sxx = sum((x - mx) ** 2 for x, _ in sent)
    if sxx <= 0:
        return None
    my = sum(x + e for x, e in sent) / len(sent)
    slope = sum((x - mx) * (x + e - my) for x, e in sent) / sxx
    return 1.0 / slope if slope > 0 else None


def holds(cell: OpenCell, floor: float) -> bool:
    """A cell holds: goodput at or over the floor, and the server kept pace (`KEEP_PACE`)."""
    g, p = cell.goodput, cell.pace
    return g is not None and g >= floor and (p is None or p >= KEEP_PACE)


def why_not(cell: OpenCell, floor: float, rate: float) -> str:
    """Why a cell did not hold, for the search's `stopped`."""
    g, p = cell.goodput, cell.pace
    if g is not None and g >= floor and p is not None:
        return (
            f"saturated: served {p:.2f} of the offered rate at {rate:.3g} req/s "
            f"(under {KEEP_PACE:g}: the queue grew), goodput {g:.2f}"
        )
    return f"saturated: goodput {g if g is not None else 0:.2f} < floor {floor:g} at {rate:.3g}"


class LaneArgs(TypedDict):
    """What every open-loop cell of a lane is run with (`open_cell`'s keywords)."""

    kind: str
    max_tokens: int
    slo: Slo
    lag_bound_ms: float
    meter: NotRequired[Meter | None]


async def measured(
    sender: Sender,
    cell: Plan,
    label: str,
    kind: str,
    max_tokens: int | None,
    lag_bound_ms: float,
    meter: Meter | None,
    how: Send = send,
) -> tuple[OpenLoopRun, list[StreamRec], dict[str, object]]:
    """`cell` sent by `how`, its streams (judged when answered), and what an open-loop cell and
    the soak record alike: window, lag, energy, trimmed streams (the rest is the rebuild's)."""
    m0 = time.monotonic()
    run = await how(sender.client, cell)
    energy = meter(m0, time.monotonic()) if meter else None
    streams: list[StreamRec] = []
    for i, s in enumerate(run.sent):
        if s.exchange is None:
            why = s.unfinished or "never sent"
            rec: StreamRec = {"unfinished": why, "failed": None, "cut": None, "files": []}
        else:
            files = sender.keep(shard_name(run, f"{label}-s{i + 1}", i), s.exchange)
            rec = stream_record(s.exchange, files, kind, max_tokens)
        rec["planned_s"] = round(s.planned_s, 4)
        rec["lag_ms"] = None if s.lag_s is None else round(s.lag_s * 1000, 2)
        streams.append(rec)
    lag = run.lag()
    tally: dict[str, object] = {
        "window_s": run.window_s,
        "lag": lag,
        "harness_error": harness_lag(lag, lag_bound_ms),
        "energy": energy,
        "streams": trimmed(streams),
    }
    return run, streams, annotate(tally, run, lag_bound_ms)  # on Ray: each worker's proof


def counts(
    streams: Sequence[Mapping[str, object]], slo: Slo, window: float | None
) -> dict[str, object]:
    """An open-loop cell's counts, tokens and goodput from its streams."""
    ok = [s for s in streams if not s.get("unfinished") and not s.get("failed")]
    tokens = sum(t for s in ok if isinstance(t := s.get("completion_tokens"), int))
    return {
        "requests": len(streams),
        "completed": sum(1 for s in ok if not s.get("cut")),
        "failed": sum(1 for s in streams if s.get("failed")),
        "cut": sum(1 for s in streams if s.get("cut")),
        "unfinished": sum(1 for s in streams if s.get("unfinished")),
        "broken": sum(1 for s in streams if s.get("broken")),
        "completion_tokens": tokens,
        **goodput(streams, slo, window).model_dump(),
        "streams": trimmed(streams),
    }


def trimmed(streams: Sequence[Mapping[str, object]]) -> list[dict[str, object]]:
    """The fields of each planned request an open-loop record keeps (`LoadStream`)."""
    return [{k: s.get(k) for k in LoadStream.model_fields} for s in streams]


async def open_cell(
    sender: Sender,
    fresh: Fresh,
    offsets: list[float],
    *,
    label: str,
    drain_s: float,
    **lane: Unpack[LaneArgs],
) -> dict[str, object]:
    """One open-loop cell between an idle check and the end of its last request."""
    kind, max_tokens, slo = lane["kind"], lane["max_tokens"], lane["slo"]
    before = await wait_idle(sender.client, sender.dialect, sender.idle_wait_s)
    bodies = [sender.request(await fresh()) for _ in offsets]  # sized before the clock starts
    span = offsets[-1] if offsets else 0.0
    cell = Plan(bodies, offsets, span + drain_s, sender.timeout_s)
    e = EarlyStop(cell, slo, kind, max_tokens)
    how = chosen(send)  # on Ray workers while a fleet is open (`capacity.spread`)
    lag_bound_ms, meter = lane["lag_bound_ms"], lane.get("meter")
    run, streams, tally = await measured(
        sender, cell, label, kind, max_tokens, lag_bound_ms, meter, how
    )
    return {
        "label": label,
        "idle_before": before.as_dict(),
        # what the search steers by (`holds`, `_knee`), as the rebuild derives it again
        "requests": len(streams),
        **goodput(streams, slo, run.window_s).model_dump(),
        "pace": pace(streams) if span > 0 else None,
        "stopped_early": e.why,
        **tally,
    }


@dataclass
class EarlyStop:
    """Ends the cell `plan` once more requests missed the SLOs (answered outside them, or running
    past the E2E bound) than its floor tolerates: a saturated cell costs seconds, not its drain."""

    plan: Plan
    slo: Slo
    kind: str
    max_tokens: int
    missed: set[int] = field(default_factory=set)
    why: str | None = None

    def __post_init__(self) -> None:
        self.plan.on_done, self.plan.watch = self.done, self.watch

    def _check(self) -> None:
        n, stop = len(self.plan.offsets), self.plan.stop
        allowed = math.floor(n * (1 - self.slo.goodput_floor) + 1e-9)
        if len(self.missed) > allowed and not stop.is_set():
            self.why = (
                f"goodput can no longer reach the floor: {len(self.missed)} of {n} "
                f"requests missed the SLOs (at most {allowed} may)"
            )
            stop.set()

    def done(self, i: int, ex: Exchange) -> None:
        if misses(stream_record(ex, [], self.kind, self.max_tokens), self.slo):
            self.missed.add(i)
            self._check()

    async def watch(self) -> None:
        bound, stop = self.slo.e2e_s, self.plan.stop
        while bound is not None and not stop.is_set():
            now = time.perf_counter()
            self.missed.update(i for i, t in self.plan.flight.running.items() if now - t > bound)
            self._check()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.2)


def step_size(rate: float, s: LoadSettings) -> int:
    return int(min(s.max_requests_per_step, max(s.min_requests, math.ceil(rate * s.step_s))))


def step_plan(
    s: LoadSettings, rate: float, k: int, seed: int, rows: list[TraceRow] | None
) -> tuple[str, list[float]]:
    """The k-th step's arrivals at `rate`: Poisson seeded by seed + k, or the trace's pattern."""
    n = step_size(rate, s)
    if s.arrival == "trace":
        if not rows:
            raise ValueError('load.arrival "trace" without a trace')
        return "trace", arrivals(rows, rate, n)
    return "poisson", poisson(rate, n, seed + k)


async def search(
    sender: Sender,
    fresh: Fresh,
    s: LoadSettings,
    *,
    seed: int,
    advance: Callable[[str], None] = lambda note: None,
    rows: list[TraceRow] | None = None,
    **lane: Unpack[LaneArgs],
) -> dict[str, object]:
    """The bounded knee search over open-loop cells (Poisson, or the pattern of the trace's
    `rows`); its cells, its `Knee`, what it used."""
    slo = lane["slo"]
    floor = slo.goodput_floor
    drain = float(slo.e2e_s or s.step_s) + s.drain_s
    t0 = time.perf_counter()
    cells: list[OpenCell] = []
    good: OpenCell | None = None
    bad: OpenCell | None = None
    used = 0

    async def step(r: float) -> OpenCell | str:
        """The cell at `r` (kept as good or bad), else why the search stops: a bound, the client."""
        nonlocal used, good, bad
        if len(cells) >= s.max_steps:
            return f"step bound: {s.max_steps} cells run"
        if used + step_size(r, s) > s.max_requests:
            return f"request bound: {used} of {s.max_requests} requests used"
        if time.perf_counter() - t0 >= s.max_total_s:
            return f"time bound: {time.perf_counter() - t0:.0f} s of {s.max_total_s:g} s used"
        used += step_size(r, s)
        name, offsets = step_plan(s, r, len(cells), seed, rows)
        c = await open_cell(
            sender, fresh, offsets, label=f"load-{name}-{r:.4g}rps", drain_s=drain, **lane
        )
        c.update(arrival=name, rate_rps=r, cell=f"{name}-{r:.4g}rps", step=len(cells) + 1)
        cells.append(cell := OpenCell.model_validate(c))
        advance(f"capacity load {r:.3g} req/s: goodput {cell.good}/{cell.requests}")
        if cell.harness_error:
            return f"harness: {cell.harness_error}"
        good, bad = (cell, bad) if holds(cell, floor) else (good, cell)
        return cell

    rate = float(s.start_rps)
    while isinstance(c := await step(rate), OpenCell):
        if good is not None and bad is not None:
            break  # a rate on each side of the floor
        rate = rate * s.factor if c is good else rate / s.factor
    stopped = c if isinstance(c, str) else why_not(c, floor, rate) if c is bad else ""
    if good is not None and bad is not None and not stopped.startswith("harness"):
        if not stopped:
            stopped = f"saturated at {bad.rate_rps:.3g} req/s (lower rates hold the floor)"
        for _ in range(s.refine):
            mid = math.sqrt((good.rate_rps or 0.0) * (bad.rate_rps or 0.0))
            if isinstance(c := await step(mid), str):
                stopped = c if c.startswith("harness") else stopped
                break
    out = {"cells": cells, "knee": _knee(good, bad, stopped, slo, floor), "requests": used}
    return out | {"wall_s": round(time.perf_counter() - t0, 3)}


def _knee(
    good: OpenCell | None, bad: OpenCell | None, stopped: str, slo: Slo, floor: float
) -> Knee:
    harness = stopped.startswith("harness")
    bounded = bad is None and not harness
    base = Knee(
        stopped=stopped,
        saturated=bad is not None and good is not None,
        lower_bound=bounded and good is not None,
        harness_error=harness,
        slo=shown(slo),
        goodput_floor=floor,
        first_over=bad.rate_rps if bad else None,
    )
    if good is None:
        why = f"no rate met goodput {floor:.0%} under SLO {shown(slo)} ({stopped})"
        nothing = dict.fromkeys(("rate_rps", "goodput", "goodput_ci95", "goodput_rps"))
        nothing["statement"] = f"no figure: {stopped}" if harness else why
        return base.model_copy(update=nothing)
    lo, hi = good.goodput_ci95 or (None, None)
    ci = f" (95% interval {lo:.0%}–{hi:.0%}, {good.requests} requests)" if lo is not None else ""
    at_least = "at least " if base.lower_bound else ""
    statement = (
        f"serves {at_least}{good.rate_rps:.3g} req/s at goodput {good.goodput:.0%}{ci} "
        f"under SLO {shown(slo)}"
    )
    keys = {"rate_rps", "goodput", "goodput_ci95", "goodput_rps", "goodput_rps_ci95", "requests"}
    update = good.model_dump(include=keys | {"cell"})
    return base.model_copy(update={**update, "statement": statement})
