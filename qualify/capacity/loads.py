"""The open-loop parts of the capacity record (`qualify.capacity.record`): the knee search's
cells, the knee, the burst and the soak, as `qualify.capacity.knee` and `qualify.capacity.soak`
write them."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from qualify.capacity.parts import Energy, Part, PlannedLength
from qualify.capacity.slo import Goodput, Slo
from qualify.capacity.specdrift import AcceptanceDrift
from qualify.serving.idle import Idle


class Lag(Part):
    """The client's own lag over an open-loop cell (`qualify.capacity.openloop`)."""

    send_lag_ms_p50: float | None = None
    send_lag_ms_p99: float | None = None
    send_lag_ms_max: float | None = None
    loop_oversleep_ms_p99: float | None = None
    loop_oversleep_ms_max: float | None = None
    ticks: int = 0


class LoadStream(Part):
    """One planned request of an open-loop cell or the soak, trimmed."""

    failed: str | None = None
    cut: str | None = None
    unfinished: str | None = None
    broken: list[str] | None = None
    finish_reason: str | None = None
    completion_tokens: int | None = None
    ttft_s: float | None = None
    e2e_s: float | None = None
    decode_tok_s: float | None = None
    planned_s: float | None = None
    lag_ms: float | None = None
    files: list[str] = Field(default_factory=list)


class Probe(Part):
    """One clock probe of a Ray worker: the driver's clock when the call left and when the
    answer came back, and the worker's clock when it answered (`qualify.capacity.spread`)."""

    sent_s: float = 0.0
    worker_s: float = 0.0
    back_s: float = 0.0


class SpreadWorker(Part):
    """One Ray worker of an open-loop cell: where it ran, its clock and how it kept its share."""

    worker: int = 0
    node: str = ""
    host: str = ""
    requests: int = 0
    offset_ms: float | None = None  # its clock minus the driver's, from its best probe
    uncertainty_ms: float | None = None  # half that probe's round trip
    probes: list[Probe] = Field(default_factory=list)
    start_late_ms: float | None = None  # its first instant past the broadcast start
    lag: Lag = Field(default_factory=Lag)
    cpu_s: float | None = None
    lost: str | None = None


class Spread(Part):
    """How an open-loop cell ran on Ray workers (`qualify.capacity.spread`)."""

    address: str = ""
    placement: str = ""
    start_lead_s: float | None = None
    uncertainty_ms: float | None = None  # the largest of the workers'
    uncertainty_bound_ms: float | None = None
    workers: list[SpreadWorker] = Field(default_factory=list)


class OpenCell(Goodput):
    """One open-loop cell (`qualify.capacity.knee.open_cell`): a Poisson step or the burst."""

    label: str = ""
    idle_before: Idle = Field(default_factory=Idle)
    completed: int = 0
    failed: int = 0
    cut: int = 0
    unfinished: int = 0
    broken: int = 0
    offered_rps: float | None = None
    achieved_rps: float | None = None
    # Served over offered rate (`qualify.capacity.knee.pace`); a cell under KEEP_PACE fell behind.
    pace: float | None = None
    window_s: float | None = None
    completion_tokens: int = 0
    output_tok_s: float | None = None
    lag: Lag = Field(default_factory=Lag)
    harness_error: str | None = None
    stopped_early: str | None = None
    energy: Energy | None = None
    streams: list[LoadStream] = Field(default_factory=list)
    spread: Spread | None = None
    # "trace": a knee step in the replay trace's arrival pattern (`load.arrival`)
    arrival: Literal["poisson", "burst", "trace"] = "poisson"
    rate_rps: float | None = None
    cell: str = ""
    step: int | None = None


class ReplayCell(OpenCell):
    """One replay of a trace at one scale (`qualify.capacity.replay.replay_cell`)."""

    arrival: Literal["trace"] = "trace"
    trace: str = ""
    trace_sha256: str = ""
    scale: float = 1.0
    sessions: int = 0


class SessionTurn(Part):
    """One turn of an agent session (`qualify.capacity.sessions.turn_record`)."""

    session: int = 0
    turn: int = 0
    failed: str | None = None
    cut: str | None = None
    broken: list[str] = Field(default_factory=list)
    scripted: bool = False
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    cached_tokens: int | None = None
    completion_tokens: int | None = None
    ttft_s: float | None = None
    e2e_s: float | None = None
    decode_tok_s: float | None = None
    tool_calls: int = 0
    files: list[str] = Field(default_factory=list)


class Sessions(Goodput):
    """The multi-turn agent sessions (`qualify.capacity.sessions`)."""

    count: int = 0
    window_s: float | None = None
    turns: list[SessionTurn] = Field(default_factory=list)
    ttft_p50_s_by_turn: list[float | None] = Field(default_factory=list)
    prompt_tokens_by_turn: list[float | None] = Field(default_factory=list)
    cached_tokens_by_turn: list[float | None] = Field(default_factory=list)
    judged: int = 0
    broken: int = 0


class Knee(Part):
    """The knee search's result (`qualify.capacity.knee`): `statement` is the sentence the
    decision shows ("serves R req/s at goodput G under SLO S")."""

    stopped: str = ""
    saturated: bool = False
    lower_bound: bool = False
    harness_error: bool = False
    slo: str = ""
    goodput_floor: float = 0.0
    first_over: float | None = None
    rate_rps: float | None = None
    goodput: float | None = None
    goodput_ci95: list[float] | None = None
    goodput_rps: float | None = None
    goodput_rps_ci95: list[float] | None = None
    requests: int | None = None
    cell: str | None = None
    statement: str = ""


class SoakProgress(Part):
    counter: str | None = None
    generated_delta: float | None = None
    scrapes: int = 0


class SoakMemory(Part):
    source: str | None = None
    start_mib: float | None = None
    end_mib: float | None = None
    max_mib: float | None = None
    growth_mib: float | None = None


class Drift(Part):
    first_p50_s: float | None = None
    last_p50_s: float | None = None
    drift_pct: float | None = None
    answered: int = 0
    # answered requests in each third; None in records made before, whose drift is judged
    # without the house's `soak_min_third_requests`
    per_third: int | None = None


def soak_rate_from(fixed_rps: float | None, knee_rps: float | None) -> str:
    """Where the soak's rate came from: the candidate's fixed rate, a held knee, or (no knee
    held) the lowest rate the search tried, which shows nothing the server holds."""
    return "fixed" if fixed_rps is not None else "knee" if knee_rps is not None else "lowest-tried"


class Soak(Goodput):
    """The soak (`qualify.capacity.soak.soak`): liveness, drift, memory, error counters;
    `rate_from` (`soak_rate_from`; an earlier build wrote none)."""

    rate_rps: float | None = None
    rate_from: Literal["fixed", "knee", "lowest-tried"] | None = None
    duration_s: float | None = None
    stall_s: float | None = None
    poll_s: float | None = None
    stall_bound_s: float | None = None
    detection_bound_s: float | None = None
    planned: int = 0
    sent: int = 0
    completed: int = 0
    failed: int = 0
    cut: int = 0
    unfinished: int = 0
    broken: int = 0
    hung: str | None = None
    detected_after_s: float | None = None
    health: dict[str, int] = Field(default_factory=dict)
    progress: SoakProgress = Field(default_factory=SoakProgress)
    error_counters: dict[str, float] = Field(default_factory=dict)
    error_counters_seen: list[str] = Field(default_factory=list)
    memory: SoakMemory = Field(default_factory=SoakMemory)
    ttft_drift: Drift = Field(default_factory=Drift)
    # The draft counters on every scrape and the acceptance per third they give
    # (`qualify.capacity.specdrift`); None in a record made before: not measured.
    acceptance_columns: list[str] = Field(default_factory=list)
    acceptance_series: list[list[float | None]] | None = None
    acceptance_drift: AcceptanceDrift | None = None
    window_s: float | None = None
    completion_tokens: int = 0
    lag: Lag = Field(default_factory=Lag)
    harness_error: str | None = None
    energy: Energy | None = None
    timeline_columns: list[str] = Field(default_factory=list)
    timeline: list[list[int | float | str | None]] = Field(default_factory=list)
    streams: list[LoadStream] = Field(default_factory=list)


class Edge(Part):
    """The incumbent's steps at the candidate's edge (`qualify.capacity.edge`), else why not."""

    status: str = ""
    why: str | None = None
    cells: list[OpenCell] = Field(default_factory=list)


class Load(Part):
    """The open-loop load on the candidate, and the incumbent at the candidate's edge."""

    length: PlannedLength | None = None
    slo: Slo | None = None
    lane: str = "candidate"
    kind: str = "prose"
    error: str | None = None
    cells: list[OpenCell] = Field(default_factory=list)
    knee: Knee | None = None
    requests: int = 0
    wall_s: float | None = None
    soak: Soak | None = None
    # the trace replayed at each scale (`qualify.capacity.replay`); none before replay existed
    replay: list[ReplayCell] = Field(default_factory=list)
    # the multi-turn agent sessions (`qualify.capacity.sessions`); none before they existed
    sessions: Sessions | None = None
    incumbent: Edge | None = None
