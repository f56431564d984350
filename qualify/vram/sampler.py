"""The background sampler: every `interval_ms`, one read of every GPU, filed under the stage
that was running. Within a stage, `part` names a part of it (a context rung, an A/B lane's
timed run) so the series can be cut there; `window` gives each card's figures over one.

The thread sleeps to the next deadline of a fixed monotonic schedule (`Event.wait`, never a busy
loop); a read that overruns skips the ticks it missed rather than bursting to catch up, and the
missed time shows as a gap. Every sample, stage start and lost card goes straight into the
run's evidence (`qualify.vram.series.SampleLog`) as it happens; the vram stage judges from there.
"""

from __future__ import annotations

import bisect
import threading
import time
from array import array
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from qualify.httpclient.timing import percentile
from qualify.records import CardWindow, GpuNote, PartGpu
from qualify.vram import record
from qualify.vram.energy import NO_TELEMETRY, integrate, window_energy
from qualify.vram.readings import Card, Lost, Poll, Reading
from qualify.vram.series import SampleLog, figures


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
class LostAt:
    stage: str | None
    t_s: float
    why: str


@dataclass
class Track:
    """Everything kept about one card."""

    card: Card
    samples: int = 0
    last_t: float | None = None
    lost: LostAt | None = None


@dataclass(frozen=True)
class Window:
    """Every card over a timed window; no card and `why` when there is no telemetry."""

    cards: dict[str, CardWindow] = field(default_factory=dict)
    why: str | None = None


class Parts(Protocol):
    """What a stage asks of the sampler to cut its series per rung or lane."""

    def part(self, name: str | None, at: float | None = None) -> None: ...
    def window(self, t0: float, t1: float) -> Window: ...


T = TypeVar("T")
Marked = tuple[T, float, float, float]


def parts_of(sampler: object) -> Parts | None:
    """The run's sampler as `Parts`, or None when the run has none."""
    if callable(getattr(sampler, "part", None)) and callable(getattr(sampler, "window", None)):
        return sampler  # type: ignore[return-value]
    return None


async def marked(parts: Parts | None, name: str, work: Callable[[], Awaitable[T]]) -> Marked[T]:
    """`work()` awaited as the part `name` of the stage in the sampler's log (where there is a
    sampler): its result, its wall time and its monotonic window."""
    t0, m0 = time.perf_counter(), time.monotonic()
    if parts is not None:
        parts.part(name, at=m0)
    done = await work()
    span, m1 = time.perf_counter() - t0, time.monotonic()
    if parts is not None:
        parts.part(None, at=m1)
    return done, span, m0, m1


def gpu_over(parts: Parts | None, part: str, t0: float, t1: float) -> PartGpu | None:
    """Each card's lowest free memory and mean power over a marked window (a run's or a row's
    `gpu`); None without a sampler or telemetry (the stage's record says why, once)."""
    w = parts.window(t0, t1) if parts is not None else None
    if w is None or not w.cards:
        return None
    return PartGpu(part=part, cards=dict(w.cards))


def gpu_note(parts: Parts | None, reserve_gib: float) -> GpuNote:
    """A stage record's `gpu`: the house reserve its parts' free memory is read against, and
    why no part has figures when the run has no GPU telemetry."""
    no_sampler = "no GPU telemetry (no sampler in this run)"
    why = no_sampler if parts is None else parts.window(0.0, 0.0).why
    return GpuNote(reserve_gib=reserve_gib, why=why)


def hardware(src: Source | None) -> dict[str, object]:
    """What the host runs on, for the hardware record: the CPU model, and the GPU driver and
    CUDA versions where the source (NVML) gives them."""
    from qualify.serving.local import cpu_model

    system = getattr(src, "system", None)
    out: dict[str, object] = {"cpu_model": cpu_model()}
    if callable(system):
        out.update(system())
    return out


class Sampler:
    """Samples a source in a background thread from the first `mark` until `stop`."""

    def __init__(
        self,
        source: Source | None,
        interval_ms: int = 250,
        unavailable: str | None = None,
        problems: list[str] | None = None,
        log: SampleLog | None = None,
    ) -> None:
        self.source = source
        self.log = log if log is not None else SampleLog()
        self.interval_ms = interval_ms
        self.interval = interval_ms / 1000.0
        self.gap = max(1.0, 4 * self.interval)  # the widest gap a power integral bridges (s)
        self.unavailable = unavailable
        self.problems = list(problems or [])
        self.failure: str | None = None
        self.tracks = {c.gpu: Track(c) for c in (source.cards() if source else [])}
        # each card's power readings (monotonic s, W), for energy over a timed window
        self.power: dict[str, tuple[array[float], array[float]]] = {}
        # each card's free memory readings (monotonic s, MiB), for the figures of a window
        self.free: dict[str, tuple[array[float], array[float]]] = {}
        self.latest: dict[str, Reading] = {}
        self.marks: list[tuple[float, str]] = []
        self.intervals = array("d")
        self.read_ms = array("d")
        self.cpu_ms = array("d")
        self.missed = 0
        self.missed_examples: list[str] = []
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
                if self.source is not None:
                    self.log.open(self.header())
            self.marks.append((now, stage))
            self.log.write({"mark": stage, "t_s": round(now - self.t0, 3)})
        self._go.set()

    def part(self, name: str | None, at: float | None = None) -> None:
        """From now on (or from monotonic time `at`), samples belong to part `name` of the
        running stage; None ends it (so does the next stage). Logged as `{"part": name,
        "stage": stage, "t_s": t}`, a line a reader of stage marks alone passes over; samples
        stay filed under their stage. Before the first stage there is nothing to cut."""
        now = time.monotonic() if at is None else at
        with self._lock:
            if self.t0 is None:
                return
            stage = self.marks[-1][1] if self.marks else None
            self.log.write({"part": name, "stage": stage, "t_s": round(now - self.t0, 3)})

    def window(self, t0: float, t1: float) -> Window:
        """Each card's figures over the monotonic window [t0, t1]: the lowest free memory of the
        samples taken in it (and of the last one before it, the state it started in), the mean
        power (the integrated power over the window's length, `qualify.vram.energy.integrate`)
        and the samples taken in it; no card, with why, without telemetry."""
        if self.source is None:
            return Window(why=f"no GPU telemetry ({self.unavailable})")
        with self._lock:
            free = {g: (list(ts), list(fs)) for g, (ts, fs) in self.free.items()}
            power = {g: (list(ts), list(ws)) for g, (ts, ws) in self.power.items()}
        cards = {}
        for gpu in sorted(free):
            ts, fs = free[gpu]
            lo, hi = bisect.bisect_left(ts, t0), bisect.bisect_right(ts, t1)
            seen = fs[max(0, lo - 1) : hi]
            mean = None
            if gpu in power and t1 > t0:
                joules, _ = integrate(*power[gpu], t0, t1, self.gap)
                mean = None if joules is None else joules / (t1 - t0)
            low = min(seen, default=None)
            cards[gpu] = CardWindow(min_free_mib=low, mean_power_w=mean, samples=hi - lo)
        return Window(cards=cards, why=None if cards else "no sample of any card yet")

    def header(self) -> dict[str, object]:
        """What the sample log says of its source, once, before the first sample."""
        src = self.source
        return {
            "source": src.name if src else None,
            "power_field": src.power_field if src else None,
            "memory_info": src.memory_info if src else None,
            "interval_ms": self.interval_ms,
            "t0_utc": self.started_utc,
            "cards": [
                {k: getattr(t.card, k) for k in ("gpu", "name", "uuid", "total_mib")}
                for t in self.tracks.values()
            ],
            "start_problems": list(self.problems),
            "system": hardware(src),
        }

    def stop(self) -> None:
        """End sampling, close the source, seal the sample log; safe to call twice."""
        self._halt.set()
        self._go.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        with self._lock:
            self.log.close(self.summary())

    def summary(self) -> dict[str, object]:
        """How the sampling went: timing, its own cost, missed scrapes, a failure."""
        return {
            "interval_ms": self.interval_stats(),
            "cost_ms": self.cost_stats(),
            "samples": {gpu: t.samples for gpu, t in self.tracks.items()},
            "missed_scrapes": self.missed,
            "missed_examples": self.missed_examples,
            "failure": self.failure,
        }

    def stages(self) -> list[str]:
        return list(dict.fromkeys(name for _, name in self.marks))

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
            room = 20 - len(self.missed_examples)
            self.missed_examples.extend(poll.missed[: max(0, room)])
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
        if track.last_t is not None:
            self.intervals.append((r.t - track.last_t) * 1000)
        track.last_t = r.t
        track.samples += 1
        self.latest[r.gpu] = r
        fts, fs = self.free.setdefault(r.gpu, (array("d"), array("d")))
        fts.append(r.t)
        fs.append(r.free_mib)
        if r.power_w is not None:
            ts, ws = self.power.setdefault(r.gpu, (array("d"), array("d")))
            ts.append(r.t)
            ws.append(r.power_w)
        assert self.t0 is not None
        t_s = round(r.t - self.t0, 3)
        self.log.write([t_s, stage, r.gpu, r.free_mib, r.used_mib, r.power_w])

    def _lose(self, lost: Lost) -> None:
        track = self.tracks.get(lost.gpu)
        if track is None or track.lost is not None:
            return
        t_s = lost.t - self.t0 if self.t0 is not None else 0.0
        track.lost = LostAt(self._stage_at(lost.t), t_s, lost.why)
        self.log.write(
            {"lost": lost.gpu, "stage": track.lost.stage, "t_s": round(t_s, 3), "why": lost.why}
        )

    def used_mib(self) -> float | None:
        """Memory used on every card now (the latest reading of each), MiB; None unknown."""
        with self._lock:
            used = [r.used_mib for r in self.latest.values()]
        if not used or any(u is None for u in used):
            return None
        return float(sum(u for u in used if u is not None))

    def energy(self, t0: float, t1: float) -> dict[str, object]:
        """Joules of every card over the monotonic window [t0, t1] (`qualify.vram.energy`);
        unmeasured, with why, when the source reads no power or the samples leave a gap."""
        if self.source is None:
            return window_energy({}, t0, t1) | {"why": NO_TELEMETRY + f" ({self.unavailable})"}
        if self.source.power_field is None:
            return window_energy({}, t0, t1) | {"why": "unmeasured: the source reads no power"}
        with self._lock:
            series = {g: (list(ts), list(ws)) for g, (ts, ws) in self.power.items()}
        if not series:
            return window_energy({}, t0, t1) | {"why": "unmeasured: no power sample yet"}
        return window_energy(series, t0, t1, self.gap) | {"power_field": self.source.power_field}

    def figures(self) -> dict[str, record.Card]:
        """Per card, per stage, from what this sampler logged (as the vram stage reads it)."""
        with self._lock:
            log = self.log.read()
        return figures([log] if log is not None else [])

    def interval_stats(self) -> dict[str, float | None]:
        values = list(self.intervals)
        return {"p50": percentile(values, 50), "p99": percentile(values, 99)}

    def cost_stats(self) -> dict[str, float | None]:
        costs = (("read", list(self.read_ms)), ("cpu", list(self.cpu_ms)))
        return {f"{k}_p{q}": percentile(v, q) for k, v in costs for q in (50, 99)}
