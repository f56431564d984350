"""The soak: a steady open-loop load for the house's duration, watched for liveness (a hung
engine stops it), error counters, memory, TTFT and acceptance drift (docs/capacity.md, "The soak:
liveness and drift").
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Unpack

from qualify.ab.acceptance import SpecCounters
from qualify.capacity.knee import Fresh, LaneArgs, measured
from qualify.capacity.openloop import Plan, poisson
from qualify.capacity.slo import number
from qualify.capacity.specdrift import SERIES_COLUMNS, spec_point
from qualify.httpclient.timing import median
from qualify.serving.dialects import MetricsSnapshot
from qualify.serving.sender import Sender

POLL_S = 1.0
PROBE_TIMEOUT_S = 2.0
TIMELINE_MAX = 600
SOAK_SEED = 7919  # the soak's arrivals: the stage's seed plus this
_ERROR_NAME = re.compile(r"(error|fail|abort|reject)", re.I)
# Counters that step while an engine works, besides its generated-token counter: llama-server
# adds to tokens_predicted_total only when a request ends, but counts every decode call (prompt
# batches included) in n_decode_total as it goes.
STEP_COUNTERS = (
    "llamacpp:n_decode_total",
    "llamacpp:prompt_tokens_total",
    "vllm:prompt_tokens_total",
    "sglang:prompt_tokens_total",
)


def progress(snap: MetricsSnapshot | None, generated: tuple[str, ...]) -> float | None:
    """One number that grows while the engine makes progress: the sum of its generated-token
    and step counters in one scrape (None when it exposes none of them)."""
    found = [v for n in (*generated, *STEP_COUNTERS) if snap and (v := snap.total(n)) is not None]
    return sum(found) if found else None


def error_counters(snap: MetricsSnapshot | None) -> dict[str, float]:
    """The engine's error-like counters in one scrape, by name (and label for reasons)."""
    if snap is None:
        return {}
    out: dict[str, float] = {}
    for name, series in snap.samples.items():
        if not name.endswith("_total"):
            continue
        if _ERROR_NAME.search(name):
            out[name] = sum(series.values())
            continue
        for labels, v in series.items():
            for key, value in labels:
                if key in ("finished_reason", "reason") and value in ("abort", "error"):
                    out[f"{name}{{{key}={value}}}"] = out.get(f"{name}{{{key}={value}}}", 0) + v
    return out


def rss_mib(pid: int | None) -> float | None:
    """Resident memory of a process (Linux `/proc/PID/status` VmRSS), MiB; None if unknown."""
    if pid is None:
        return None
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    m = re.search(r"^VmRSS:\s+(\d+)\s+kB", text, re.M)
    return int(m.group(1)) / 1024 if m else None


def drift(streams: Sequence[Mapping[str, object]]) -> dict[str, object]:
    """Median TTFT of the last third over the first third, by planned send time, with how many
    answered requests each third holds (`per_third`: the gate judges no drift from fewer than
    the house's `soak_min_third_requests`)."""
    at = [(number(s.get("planned_s")) or 0.0, number(s.get("ttft_s"))) for s in streams]
    ok = sorted([(p, t) for p, t in at if t is not None], key=lambda pt: pt[0])
    third = len(ok) // 3
    first = median([float(t) for _, t in ok[:third]]) if third >= 2 else None
    last = median([float(t) for _, t in ok[-third:]]) if third >= 2 else None
    pct = (last / first - 1) * 100 if first and last is not None else None
    return dict(
        first_p50_s=first, last_p50_s=last, drift_pct=pct, answered=len(ok), per_third=third
    )


@dataclass
class Watcher:
    """Polls progress, health, error counters and memory while the soak's `plan` runs."""

    s: Sender
    plan: Plan
    stall_s: float
    health_path: str
    memory: Callable[[], float | None]
    poll_s: float
    e2e_s: float
    hung: str | None = None
    detected_after_s: float | None = None
    timeline: list[list[float | int | str | None]] = field(default_factory=list)
    generated: list[float] = field(default_factory=list)
    errors_first: dict[str, float] | None = None
    errors_last: dict[str, float] = field(default_factory=dict)
    memory_mib: list[float] = field(default_factory=list)
    health: dict[str, int] = field(default_factory=dict)
    spec: list[list[float | None]] = field(default_factory=list)
    t0: float = field(default_factory=time.perf_counter)

    def __post_init__(self) -> None:
        self.bound_s = self.stall_s  # the stall bound in force, set again on each poll

    async def _probe(self) -> tuple[MetricsSnapshot | None, str]:
        """One scrape and one health check, counted."""
        c = self.s.client
        metrics, health = await asyncio.gather(
            c.get("/metrics", timeout_s=PROBE_TIMEOUT_S),
            c.get(self.health_path, timeout_s=PROBE_TIMEOUT_S),
        )
        snap = None
        if metrics.ok and metrics.text is not None:
            with contextlib.suppress(ValueError):
                snap = MetricsSnapshot.parse(metrics.text, time.monotonic())
        said = f"HTTP {health.status}" if health.status is not None else "no answer"
        if health.error_kind is not None:
            said = f"no answer ({health.error_kind})"
        self.health[said] = self.health.get(said, 0) + 1
        if snap is not None:
            self.errors_last = error_counters(snap)
            if (gen := snap.first(self.s.dialect.generated)) is not None:
                self.generated.append(gen)
            # one row of the draft-counter series (`specdrift`), where the engine has any
            point = spec_point(SpecCounters.read(snap, self.s.dialect))
            if point is not None and len(self.spec) < TIMELINE_MAX:
                self.spec.append([round(time.perf_counter() - self.t0, 2), *point])
        return snap, said

    async def run(self) -> None:
        f, stop = self.plan.flight, self.plan.stop
        last_progress = time.perf_counter()
        last_step: float | None = None
        last_done = f.completed
        while not stop.is_set():
            snap, health = await self._probe()
            now = time.perf_counter()
            step = progress(snap, self.s.dialect.generated)
            grew = step is not None and last_step is not None and step > last_step
            if grew or f.completed != last_done or f.in_flight == 0:
                last_progress = now
            last_step, last_done = last_step if step is None else step, f.completed
            if snap is not None and self.errors_first is None:
                self.errors_first = self.errors_last
            mem = self.memory()
            if mem is not None:
                self.memory_mib.append(mem)
            if len(self.timeline) < TIMELINE_MAX:
                t, mib = round(now - self.t0, 2), None if mem is None else round(mem, 1)
                self.timeline.append([t, step, f.completed, f.in_flight, health, mib])
            stalled = now - last_progress
            # without a progress counter only a finished request shows progress, so a request
            # may take up to the E2E bound before silence means anything
            bound = self.stall_s if step is not None else max(self.stall_s, self.e2e_s)
            self.bound_s = bound
            if f.in_flight > 0 and stalled >= bound:
                counter = "no progress counter" if step is None else "no progress counter step"
                self.hung = (
                    f"hung engine: no progress for {stalled:.1f} s with {f.in_flight} "
                    f"requests in flight ({counter}, no request completed); /health meanwhile: "
                    + ", ".join(f"{k} ×{v}" for k, v in self.health.items())
                )
                self.detected_after_s = stalled
                stop.set()
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.poll_s)
        # once more after the last request ended: llama-server adds a request's tokens to its
        # generated-token counter only when it ends, which the last poll may have missed
        await self._probe()

    def seen(self, memory_source: str | None) -> dict[str, object]:
        """What the watcher saw over the soak, for its record."""
        first, last = self.errors_first or {}, self.errors_last
        gen, mem, generated = self.generated, self.memory_mib, self.s.dialect.generated
        rose = {k: v - first.get(k, 0.0) for k, v in last.items()}
        return {
            "hung": self.hung,
            "detected_after_s": self.detected_after_s,
            "health": self.health,
            "progress": {
                "counter": generated[0] if generated else None,
                "generated_delta": gen[-1] - gen[0] if len(gen) >= 2 else None,
                "scrapes": len(gen),
            },
            "error_counters": {k: d for k, d in rose.items() if d > 0},
            "error_counters_seen": sorted(last),
            "memory": {
                "source": memory_source if mem else None,
                "start_mib": mem[0] if mem else None,
                "end_mib": mem[-1] if mem else None,
                "max_mib": max(mem) if mem else None,
                "growth_mib": mem[-1] - mem[0] if len(mem) >= 2 else None,
            },
        }


def soak_offsets(rate_rps: float, duration_s: float, seed: int) -> list[float]:
    """Every arrival of the Poisson process that falls within the duration (s from the start)."""
    n = max(1, math.ceil(rate_rps * duration_s))
    return [o for o in poisson(rate_rps, 3 * n + 20, seed) if o < duration_s] or [0.0]


async def soak(
    sender: Sender,
    fresh: Fresh,
    *,
    rate_rps: float,
    duration_s: float,
    stall_s: float,
    health_path: str,
    seed: int,
    memory: Callable[[], float | None] = lambda: None,
    memory_source: str | None = None,
    poll_s: float = POLL_S,
    **lane: Unpack[LaneArgs],
) -> dict[str, object]:
    """The steady load and its watcher; the soak's record."""
    slo, lag_bound_ms, meter = lane["slo"], lane["lag_bound_ms"], lane.get("meter")
    offsets = soak_offsets(rate_rps, duration_s, seed)
    bodies = [sender.request(await fresh()) for _ in offsets]
    drain = float(slo.e2e_s or 60.0)
    cell = Plan(bodies, offsets, duration_s + drain, sender.timeout_s)
    watcher = Watcher(sender, cell, stall_s, health_path, memory, poll_s, drain)
    cell.watch = watcher.run
    kind, max_tokens = lane["kind"], lane["max_tokens"]
    run, _, tally = await measured(sender, cell, "soak", kind, max_tokens, lag_bound_ms, meter)
    return {
        "rate_rps": rate_rps,
        "duration_s": duration_s,
        "stall_s": stall_s,
        "poll_s": poll_s,
        "stall_bound_s": watcher.bound_s,
        "detection_bound_s": watcher.bound_s + poll_s + 2 * PROBE_TIMEOUT_S,
        "planned": len(offsets),
        "sent": sum(1 for s in run.sent if s.sent_s is not None),
        **watcher.seen(memory_source),
        "acceptance_columns": SERIES_COLUMNS,
        "acceptance_series": watcher.spec,
        "timeline_columns": ["t_s", "progress", "completed", "in_flight", "health", "memory_mib"],
        "timeline": watcher.timeline,
    } | tally
