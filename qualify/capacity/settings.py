"""Candidate settings owned by the capacity part of qualify (`[stages.capacity]`); the regression
margin against the incumbent is policy (`thresholds.ab_max_regression_pct`), never set here."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import (
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)

from qualify.capacity.slo import SloSettings
from qualify.records import StrictModel

PositiveFloat = Annotated[float, Field(gt=0)]
PositiveInt = Annotated[int, Field(gt=0)]
DecodeKind = Literal["prose", "code", "json", "list"]
RangeMetric = Literal[
    "aggregate_output_tok_s", "decode_tok_s_p50", "ttft_p50_s", "ttft_p95_s", "e2e_p50_s"
]
# `c6` (every length at c=6), `2048-c6` (one cell), `*-c6` (same as `c6`).
_CELL = re.compile(r"^(?:(\*|[1-9][0-9]*)-)?c([1-9][0-9]*)$")


def parse_cell(cell: str) -> tuple[int | None, int]:
    """`2048-c6` -> (2048, 6); `c6` or `*-c6` -> (None, 6)."""
    m = _CELL.match(cell)
    if m is None:
        raise ValueError(f"expected a cell like c6 or 2048-c6 (got {cell!r})")
    length = None if m.group(1) in (None, "*") else int(m.group(1))
    return length, int(m.group(2))


class ExpectedRange(StrictModel):
    """What the candidate says one cell (or one concurrency at every length) will show."""

    cell: str = Field(description="c6 (every length at c=6) or 2048-c6 (one cell)")
    metric: RangeMetric = "aggregate_output_tok_s"
    min: Annotated[float, Field(ge=0)] | None = None
    max: Annotated[float, Field(ge=0)] | None = None

    @field_validator("cell")
    @classmethod
    def _cell(cls, v: str) -> str:
        parse_cell(v)
        return v

    @model_validator(mode="after")
    def _bounds(self) -> ExpectedRange:
        if self.min is None and self.max is None:
            raise ValueError(f"range for {self.cell}: expected min, max or both")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"range for {self.cell}: min {self.min} is above max {self.max}")
        return self

    def covers(self, length: int, concurrency: int) -> bool:
        want_len, want_c = parse_cell(self.cell)
        return want_c == concurrency and want_len in (None, length)

    def shown(self) -> str:
        lo = "-inf" if self.min is None else f"{self.min:g}"
        hi = "inf" if self.max is None else f"{self.max:g}"
        return f"{self.cell} {self.metric} {lo}–{hi}"


class LoadSettings(StrictModel):
    """The open-loop knee search and the burst (`[stages.capacity.load]`)."""

    enabled: bool = Field(True, description="run the knee search and the burst")
    length: PositiveInt | None = Field(
        None, description="prompt tokens of the load's requests (default: the first length)"
    )
    kind: DecodeKind = "prose"
    arrival: Literal["poisson", "trace"] = Field(
        "poisson",
        description="the steps' arrival process: Poisson, or the replay trace's own pattern "
        "(its trains and lulls, scaled to each step's rate; needs `replay.trace`)",
    )
    start_rps: PositiveFloat = Field(0.5, description="the knee search's first rate (req/s)")
    factor: Annotated[float, Field(gt=1, le=10)] = Field(
        2.0, description="rate multiplier between steps (and divisor below a failing start)"
    )
    refine: Annotated[int, Field(ge=0, le=4)] = Field(
        1, description="bisection steps between the last rate that held and the first that did not"
    )
    step_s: PositiveFloat = Field(
        20.0, description="planned length of one step: rate × step_s requests (within bounds)"
    )
    min_requests: Annotated[int, Field(ge=2, le=1000)] = 8
    max_requests_per_step: Annotated[int, Field(ge=2, le=4096)] = 64
    max_steps: Annotated[int, Field(ge=1, le=20)] = 6
    max_requests: Annotated[int, Field(ge=2)] = Field(
        400, description="bound on the requests of the whole search"
    )
    max_total_s: PositiveFloat = Field(600.0, description="bound on the search's time (s)")
    drain_s: Annotated[float, Field(ge=0)] = Field(
        5.0, description="after the last send, the E2E SLO plus this before requests are cancelled"
    )
    burst: Annotated[int, Field(ge=0, le=4096)] = Field(
        8, description="requests sent at once in the burst cell (0: no burst)"
    )
    workers: Annotated[int, Field(ge=1, le=64)] = Field(
        1,
        description="Ray actors each open-loop cell runs on, one per node where the cluster has "
        "nodes (1: this process alone; more needs qualify[ray], `qualify.capacity.spread`)",
    )
    ray_address: str | None = Field(
        None,
        description="the Ray cluster of the workers: `auto` or `ray://host:10001` (the "
        "QUALIFY_RAY_ADDRESS environment variable overrides it; neither: `auto`)",
    )

    @model_serializer(mode="wrap")
    def _unset_spread(self, handler: SerializerFunctionWrapHandler) -> dict[str, object]:
        # Records of earlier builds hold no `workers` nor `ray_address`: one load of this
        # process alone writes the same settings they did (the rebuild compares them).
        out: dict[str, object] = handler(self)
        if out.get("workers") == 1 and out.get("ray_address") is None:
            out.pop("workers", None)
            out.pop("ray_address", None)
        if out.get("arrival") == "poisson":  # nor an `arrival`
            out.pop("arrival", None)
        return out


class SoakSettings(StrictModel):
    """The soak (`[stages.capacity.soak]`); its duration and stall bound are the house's."""

    enabled: bool = True
    duration_s: PositiveFloat | None = Field(
        None, description="longer than the house's soak_duration_s (never shorter)"
    )
    rate_fraction: Annotated[float, Field(gt=0, le=1)] = Field(
        0.5, description="soak rate as a share of the knee (of the lowest rate tried without one)"
    )
    rate_rps: PositiveFloat | None = Field(None, description="a fixed soak rate instead")
    poll_s: Annotated[float, Field(gt=0, le=10)] = 1.0


class ReplaySettings(StrictModel):
    """Trace replay (`[stages.capacity.replay]`): off unless a trace is named."""

    trace: str | None = Field(
        None, description="a JSONL trace (Mooncake or qualify's form), relative to the candidate"
    )
    scales: list[PositiveFloat] = Field(
        default_factory=lambda: [1.0, 2.0],
        min_length=1,
        description="replay speeds: 1 is the trace's own pace, 2 twice as fast",
    )
    block_tokens: PositiveInt = Field(512, description="tokens per hash_ids block of the trace")


class SessionSettings(StrictModel):
    """Multi-turn agent sessions (`[stages.capacity.sessions]`): off at 0."""

    count: Annotated[int, Field(ge=0, le=64)] = Field(0, description="sessions run at once")
    max_tokens: PositiveInt = Field(64, description="max_tokens of each turn")


class CapacitySettings(StrictModel):
    """The capacity matrix and per-kind decode; every prompt is sized with the server's tokenizer
    and opens with a new nonce, so no request reuses another's cached prefix."""

    lengths: list[PositiveInt] = Field(
        default_factory=lambda: [256, 2048, 8192, 32768],
        min_length=1,
        description="prompt lengths in tokens; each is clamped to the window minus max_tokens",
    )
    concurrency: list[PositiveInt] = Field(
        default_factory=lambda: [1, 2, 4, 6],
        min_length=1,
        description="concurrent streams per cell, raised in this order",
    )
    runs: Annotated[int, Field(ge=1, le=20)] = Field(3, description="timed runs per cell")
    warmups: Annotated[int, Field(ge=0)] = Field(
        2, description="untimed requests per prompt length before its cells (kept as evidence)"
    )
    max_tokens: PositiveInt = 128
    ignore_eos: bool = Field(False, description="send ignore_eos: every answer runs to max_tokens")
    kinds: list[DecodeKind] = Field(
        default_factory=lambda: list[DecodeKind](["prose", "code", "json", "list"]),
        description="content kinds of the per-kind decode at c=1 (empty: none)",
    )
    kind_depths: list[PositiveInt] | None = Field(
        None, description="prompt lengths of the per-kind decode (default: lengths)"
    )
    kind_runs: Annotated[int, Field(ge=1, le=20)] = 3
    expected: list[ExpectedRange] = Field(
        default_factory=list, description="expected ranges per cell; a cell outside one fails"
    )
    max_ttft_p95_s: PositiveFloat | None = Field(
        None,
        description="saturation: stop raising concurrency at a length once a cell's p95 TTFT "
        "passes this (a cell with failed or cut requests always stops it)",
    )
    incumbent: bool = Field(
        True, description="measure the target the candidate's alias points at, alternating"
    )
    level: str | None = Field(
        None, description="reasoning level whose request fields every request carries"
    )
    slo: SloSettings = Field(
        default_factory=SloSettings, description="tightenings of the house's SLOs (never looser)"
    )
    load: LoadSettings = Field(default_factory=LoadSettings)
    soak: SoakSettings = Field(default_factory=SoakSettings)
    replay: ReplaySettings = Field(default_factory=ReplaySettings)
    sessions: SessionSettings = Field(default_factory=SessionSettings)
    timeout_s: PositiveFloat = 900.0
    idle_wait_s: PositiveFloat = 60.0
    max_tokenizer_counts: Annotated[int, Field(ge=2, le=32)] = 8

    @model_validator(mode="after")
    def _distinct(self) -> CapacitySettings:
        for name in ("lengths", "concurrency", "kinds", "kind_depths"):
            values = getattr(self, name) or []
            if len(set(values)) != len(values):
                raise ValueError(f"{name} lists a value twice ({values}); expected distinct values")
        if self.load.enabled and self.load.arrival == "trace" and self.replay.trace is None:
            raise ValueError('load.arrival "trace" follows the replay trace: expected replay.trace')
        return self

    @model_serializer(mode="wrap")
    def _unset_replay(self, handler: SerializerFunctionWrapHandler) -> dict[str, object]:
        # Records of earlier builds hold neither: without them the settings read as before.
        out: dict[str, object] = handler(self)
        if self.replay.trace is None and self.replay == ReplaySettings():
            out.pop("replay", None)
        if self.sessions == SessionSettings():
            out.pop("sessions", None)
        return out

    @property
    def loads(self) -> bool:
        """Whether the stage runs any open-loop load, replay or sessions."""
        s = self
        return s.load.enabled or s.soak.enabled or bool(s.replay.trace or s.sessions.count)

    @property
    def depths(self) -> list[int]:
        return list(self.kind_depths if self.kind_depths is not None else self.lengths)
