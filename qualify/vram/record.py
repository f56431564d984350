"""The vram stage's record: every card's figures in every stage the run ran, over every
telemetry attempt, and how the sampling went (`data` of `vram/result.json`)."""

from __future__ import annotations

from pydantic import Field

from qualify.records import StageRecord, StrictModel, Verdict, Written


class Hardware(Written):
    """What the host runs on (`qualify.vram.sampler.hardware`): the CPU model always, the
    driver, CUDA and NVML versions where the source (NVML) gives them. The JSON form holds the
    fields the source gave."""

    cpu_model: str
    driver_version: str | None = None
    cuda_driver_version: str | None = None
    nvml_version: str | None = None


class Interval(StrictModel):
    """The sampler's interval: the one asked for and the ones it kept (ms)."""

    target: int | None = None
    p50: float | None = None
    p99: float | None = None


class Cost(StrictModel):
    """What one read of every GPU cost the sampler (ms of wall and of CPU time)."""

    read_p50: float | None = None
    read_p99: float | None = None
    cpu_p50: float | None = None
    cpu_p99: float | None = None


class Telemetry(StrictModel):
    """One telemetry attempt (one sampler's log) as read back."""

    attempt: int
    source: str | None = None
    power_field: str | None = None
    memory_info: str | None = None
    interval_ms: int | None = None
    start_problems: list[str] = Field(default_factory=list)
    stopped: bool
    missed_scrapes: int = 0
    missed_examples: list[str] = Field(default_factory=list)
    failure: str | None = None
    files: list[str] = Field(default_factory=list)


class StageFigures(StrictModel):
    """One card in one stage, over every attempt: the lowest free memory, the peak power, the
    samples, the gaps (steps over twice the interval) and the intervals those gaps missed."""

    min_free_mib: float | None = None
    peak_power_w: float | None = None
    samples: int = 0
    gaps: int = 0
    missed: int = 0
    attempts: list[int] = Field(default_factory=list)

    def add(self, free: float, power: float | None, missed: int, attempt: int) -> None:
        self.samples += 1
        self.gaps += int(missed > 0)
        self.missed += missed
        if self.min_free_mib is None or free < self.min_free_mib:
            self.min_free_mib = free
        if power is not None and (self.peak_power_w is None or power > self.peak_power_w):
            self.peak_power_w = float(power)
        if attempt not in self.attempts:
            self.attempts.append(attempt)


class Lost(StrictModel):
    """A card that disappeared: in which stage, when, why, in which telemetry attempt."""

    lost: str
    stage: str
    t_s: float = 0.0
    why: str
    attempt: int


class Card(StrictModel):
    """One card: its figures in every stage, and whether (when, why) it disappeared."""

    gpu: str
    name: str = ""
    total_mib: float | None = None
    stages: dict[str, StageFigures] = Field(default_factory=dict)
    lost: Lost | None = None
    # Early builds judged each card inside the stage and wrote its verdict here; the judges
    # (`qualify.vram.judges`) decide now, so a record of this build never writes it.
    verdict: Verdict | None = Field(default=None, exclude_if=lambda v: v is None)

    @property
    def who(self) -> str:
        return f"GPU {self.gpu} ({self.name})" if self.name else f"GPU {self.gpu}"


class Record(StageRecord):
    """Every card in every stage, from every telemetry attempt of the run."""

    source: str | None = None
    hardware: Hardware | None = None
    power_field: str | None = None
    reserve_gib: float
    interval_ms: Interval = Field(default_factory=Interval)
    cost_ms: Cost | None = None
    stages: list[str] = Field(default_factory=list)
    no_telemetry: str | None = None
    telemetry: list[Telemetry] = Field(default_factory=list)
    cards: list[Card] = Field(default_factory=list)
    series_files: list[str] = Field(default_factory=list)
