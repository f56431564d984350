"""The background sampler: every `interval_ms`, one read of every GPU, filed under the stage
that was running.

The thread sleeps to the next deadline of a fixed monotonic schedule (`Event.wait`, never a busy
loop); a read that overruns skips the ticks it missed rather than bursting to catch up, and the
missed time shows as a gap. Per stage and per card it keeps the lowest free memory, the peak
power, the sample count and the gaps (an interval over twice the target), and the time series.
"""

from __future__ import annotations

import bisect
import threading
import time
from array import array
from dataclasses import dataclass, field
from typing import Protocol

from qualify.vram.readings import Card, Lost, Poll, Reading
from qualify.vram.series import Row, downsample

MAX_ROWS = 50_000  # per card in memory; beyond it the series is merged (minimum kept)


class Source(Protocol):
    """What a telemetry source offers (NVML, nvidia-smi, DCGM)."""

    @property
    def name(self) -> str: ...
    @property
    def power_field(self) -> str | None: ...
    @property
    def memory_info(self) -> str: ...

    def cards(self) -> list[Card]: ...
    def poll(self) -> Poll: ...
    def close(self) -> None: ...


@dataclass
class StageStats:
    min_free_mib: float | None = None
    peak_power_w: float | None = None
    samples: int = 0
    gaps: int = 0

    def add(self, r: Reading, gap: bool) -> None:
        self.samples += 1
        self.gaps += int(gap)
        if self.min_free_mib is None or r.free_mib < self.min_free_mib:
            self.min_free_mib = r.free_mib
        if r.power_w is not None and (self.peak_power_w is None or r.power_w > self.peak_power_w):
            self.peak_power_w = r.power_w


@dataclass
class LostAt:
    stage: str | None
    t_s: float
    why: str


@dataclass
class Track:
    """Everything kept about one card."""

    card: Card
    stages: dict[str, StageStats] = field(default_factory=dict)
    rows: list[Row] = field(default_factory=list)
    last_t: float | None = None
    lost: LostAt | None = None


def percentile(values: list[float], q: float) -> float | None:
    """The q-th percentile (0..100), linear between ranks; None for no values."""
    if not values:
        return None
    s = sorted(values)
    pos = (len(s) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


class Sampler:
    """Samples a source in a background thread from the first `mark` until `stop`."""

    def __init__(
        self,
        source: Source | None,
        interval_ms: int = 250,
        unavailable: str | None = None,
        problems: list[str] | None = None,
    ) -> None:
        self.source = source
        self.interval_ms = interval_ms
        self.interval = interval_ms / 1000.0
        self.unavailable = unavailable
        self.problems = list(problems or [])
        self.failure: str | None = None
        self.tracks = {c.gpu: Track(c) for c in (source.cards() if source else [])}
        self.marks: list[tuple[float, str]] = []
        self.intervals = array("d")
        self.read_ms = array("d")
        self.cpu_ms = array("d")
        self.missed = 0
        self.t0: float | None = None
        self.started_utc: str | None = None
        self._lock = threading.Lock()
        self._go = threading.Event()
        self._halt = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> Sampler:
        if self.source is not None:
            self._thread = threading.Thread(target=self._run, name="gpu-sampler", daemon=True)
            self._thread.start()
        return self

    def mark(self, stage: str, at: float | None = None) -> None:
        """From now on (or from monotonic time `at`), samples belong to `stage`; the first mark
        starts the clock."""
        now = time.monotonic() if at is None else at
        with self._lock:
            if self.t0 is None:
                self.t0 = now
                self.started_utc = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            self.marks.append((now, stage))
        self._go.set()

    def stop(self) -> None:
        """End sampling, close the source; safe to call twice."""
        self._halt.set()
        self._go.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def stages(self) -> list[str]:
        seen: list[str] = []
        for _, name in self.marks:
            if name not in seen:
                seen.append(name)
        return seen

    def _run(self) -> None:
        assert self.source is not None
        self._go.wait()
        try:
            self._schedule()
        except Exception as exc:  # a broken source ends sampling; the stage reports it
            self.failure = f"the sampler stopped: {type(exc).__name__}: {exc}"
        finally:
            self.source.close()

    def _schedule(self) -> None:
        assert self.t0 is not None
        k = 0
        while not self._halt.is_set():
            self._tick()
            k += 1
            now = time.monotonic()
            due = self.t0 + k * self.interval
            if due <= now:  # overran: skip the ticks already missed
                k = int((now - self.t0) / self.interval) + 1
                due = self.t0 + k * self.interval
            self._halt.wait(due - now)

    def _tick(self) -> None:
        assert self.source is not None
        cpu0, wall0 = time.thread_time(), time.perf_counter()
        poll = self.source.poll()
        wall1 = time.perf_counter()
        self.ingest(poll)
        self.read_ms.append((wall1 - wall0) * 1000)
        self.cpu_ms.append((time.thread_time() - cpu0) * 1000)

    def ingest(self, poll: Poll) -> None:
        """File one poll's readings and losses under their stages (the thread calls this each
        tick; a replay of a recorded run calls it directly)."""
        with self._lock:
            self.missed += len(poll.missed)
            self.problems.extend(m for m in poll.missed if len(self.problems) < 20)
            for r in poll.readings:
                self._add(r)
            for lost in poll.lost:
                self._lose(lost)

    def _stage_at(self, t: float) -> str | None:
        i = bisect.bisect_right([m[0] for m in self.marks], t) - 1
        return self.marks[i][1] if i >= 0 else None

    def _add(self, r: Reading) -> None:
        track = self.tracks.get(r.gpu)
        stage = self._stage_at(r.t)
        if track is None or stage is None or track.lost is not None:
            return  # a card not listed at start, or a line from before the first stage
        gap = False
        if track.last_t is not None:
            step = r.t - track.last_t
            self.intervals.append(step * 1000)
            gap = step > 2 * self.interval
        track.last_t = r.t
        track.stages.setdefault(stage, StageStats()).add(r, gap)
        assert self.t0 is not None
        track.rows.append((r.t - self.t0, stage, r.free_mib, r.used_mib, r.power_w, 1))
        if len(track.rows) > MAX_ROWS:
            track.rows = downsample(track.rows, MAX_ROWS // 2)

    def _lose(self, lost: Lost) -> None:
        track = self.tracks.get(lost.gpu)
        if track is None or track.lost is not None:
            return
        t_s = lost.t - self.t0 if self.t0 is not None else 0.0
        track.lost = LostAt(self._stage_at(lost.t), t_s, lost.why)

    def interval_stats(self) -> dict[str, float | None]:
        values = list(self.intervals)
        return {"p50": percentile(values, 50), "p99": percentile(values, 99)}

    def cost_stats(self) -> dict[str, float | None]:
        wall, cpu = list(self.read_ms), list(self.cpu_ms)
        return {
            "read_p50": percentile(wall, 50),
            "read_p99": percentile(wall, 99),
            "cpu_p50": percentile(cpu, 50),
            "cpu_p99": percentile(cpu, 99),
        }
