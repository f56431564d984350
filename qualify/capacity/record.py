"""The capacity stage's record: what `qualify.capacity.stage` measured, typed (`data`).

Every part is a `Part`: a field the stage did not write (a lane that stopped before measuring,
a run excluded before it started, a record written before the load existed) reads as its
default and is left out of the JSON again, so the JSON form is exactly what was written and a
record of an earlier build still reads. The judges (`qualify.capacity.judges`), the plot and
the decision's section read these attributes, never the raw JSON.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, JsonValue, PrivateAttr

from qualify.ab.record import Acceptance  # the same figures as the A/B's
from qualify.capacity.loads import Load
from qualify.capacity.parts import Energy, Part, PlannedLength
from qualify.capacity.settings import CapacitySettings, ExpectedRange
from qualify.capacity.slo import Slo, SloMet
from qualify.httpclient.timing import ServerComparison
from qualify.records import WrittenRecord
from qualify.serving.idle import IdleAround

# --- shared figures ---------------------------------------------------------------------------


class Queue(Part):
    """The engine's running and waiting gauges polled while a run was in flight."""

    scrapes: int = 0
    running_max: float | None = None
    waiting_max: float | None = None
    waiting_mean: float | None = None


# --- the closed-loop matrix and the per-kind decode -------------------------------------------


class RunStream(Part):
    """One stream of a timed run, trimmed to what the decision reads."""

    failed: str | None = None
    cut: str | None = None
    degenerate: str | None = None
    broken: list[str] | None = None
    finish_reason: str | None = None
    completion_tokens: int | None = None
    files: list[str] = Field(default_factory=list)


class RunRecord(Part):
    """One timed run of a cell (`qualify.capacity.runs.timed_run`), as kept in the record."""

    label: str = ""
    idle: IdleAround = Field(default_factory=IdleAround)
    queue: Queue | None = None
    energy: Energy | None = None
    requests: int = 0
    failed: int = 0
    cut: int = 0
    degenerate: int = 0
    completion_tokens: int = 0
    window_s: float | None = None
    aggregate_output_tok_s: float | None = None
    decode_tok_s_p50: float | None = None
    ttft_p50_s: float | None = None
    ttft_p95_s: float | None = None
    e2e_p50_s: float | None = None
    chunks_per_token: float | None = None
    prompt_tokens_p50: float | None = None
    server_generated_tokens: float | None = None
    server_aggregate_tok_s: float | None = None
    server_window: ServerComparison | None = None  # the run against the server's histograms
    acceptance: Acceptance | None = None
    excluded: str | None = None
    run: int | None = None
    streams: list[RunStream] = Field(default_factory=list)
    # its answered streams' TTFTs (`runs.summarize`), not kept: the cell's p95 is over them
    _ttft_s: list[float] = PrivateAttr(default_factory=list)


class ExcludedRun(Part):
    run: int | None = None
    why: str = ""


class RunValues(Part):
    """The run-level figures behind a cell's medians (the incumbent's intervals)."""

    aggregate_output_tok_s: list[float] = Field(default_factory=list)
    decode_tok_s_p50: list[float] = Field(default_factory=list)


class CellFigures(Part):
    """A cell's figures over its counted runs (`qualify.capacity.matrix.median_of_runs`)."""

    decode_tok_s_p50: float | None = None
    aggregate_output_tok_s: float | None = None
    ttft_p50_s: float | None = None
    e2e_p50_s: float | None = None
    chunks_per_token: float | None = None
    prompt_tokens_p50: float | None = None
    ttft_p95_s: float | None = None
    server_ratio: float | None = None
    server_decode_ratio: float | None = None
    failed: int = 0
    cut: int = 0
    requests: int = 0
    queue_waiting_max: float | None = None
    queue_running_max: float | None = None
    energy: Energy | None = None
    j_per_output_token: float | None = None
    runs: int = 0
    counted_runs: int = 0
    excluded_runs: list[ExcludedRun] = Field(default_factory=list)
    run_values: RunValues = Field(default_factory=RunValues)
    idle_unknown: bool = False
    run_records: list[RunRecord] = Field(default_factory=list)


class MatrixRow(CellFigures):
    """One lane's cell of the matrix: a prompt length at a concurrency."""

    lane: str = "candidate"
    cell: str
    length: int
    target: int | None = None
    concurrency: int
    good: int | None = None
    goodput: float | None = None
    goodput_ci95: list[float] | None = None
    goodput_rps: float | None = None
    slo_met: SloMet | None = None
    kv_tokens_needed: int | None = None
    kv_fits: bool | None = None
    saturated: str | None = None


class KindRow(CellFigures):
    """Per-kind decode at one depth (c = 1); `error` when its prompts could not be sized."""

    kind: str
    depth: int
    target: int | None = None
    sized_tokens: int | None = None
    acceptance_rate: float | None = None
    acceptance: Acceptance | None = None
    error: str | None = None

    @property
    def cell(self) -> str:
        return f"{self.kind}@{self.depth}"


class NotRun(Part):
    lane: str
    cell: str
    why: str


class Saturation(Part):
    at: int
    why: str


class DegenerateAnswer(Part):
    lane: str = "candidate"
    where: str
    run: int | None = None
    stream: int
    reason: str
    files: list[str] = Field(default_factory=list)


class Warmup(Part):
    label: str
    n: int
    completion_tokens: int | None = None
    files: list[str] = Field(default_factory=list)


# --- the engine and the incumbent ------------------------------------------------------------


class EngineDetails(Part):
    log: dict[str, int | float] = Field(default_factory=dict)
    kv_cache_usage_perc: float | None = None
    # SGLang's `/server_info` value as the server sent it (its shape varies by version)
    max_running_requests: JsonValue = None


class Engine(Part):
    """What the engine says it can hold (`qualify.capacity.engine.engine_capacity`)."""

    kv_tokens: int | None = None
    kv_tokens_source: str | None = None
    context_per_request: int | None = None
    context_source: str | None = None
    max_concurrency_at_full_context: float | None = None
    max_concurrency_source: str | None = None
    slots: int | None = None
    details: EngineDetails = Field(default_factory=EngineDetails)
    note: str | None = None
    reported: bool = False
    engine: str | None = None


IncumbentStatus = Literal["none", "first", "same", "unusable", "found", "unreachable", "measured"]


class Incumbent(Part):
    """What the alias points at (`qualify.capacity.incumbent.find_incumbent`)."""

    status: IncumbentStatus = "none"
    why: str = ""
    alias: str | None = None
    table: str | None = None
    candidate: str | None = None
    candidate_path: str | None = None
    decision_sha256: str | None = None
    engine: Engine | None = None


class Comparison(Part):
    """Candidate against incumbent in one cell and metric (`qualify.capacity.incumbent`)."""

    cell: str
    metric: str
    candidate: float | None = None
    incumbent: float | None = None
    delta_pct: float | None = None
    delta_pct_ci95: list[float] | None = None
    runs: list[int] = Field(default_factory=list)


# --- every answer judged ---------------------------------------------------------------------


class BrokenAnswer(Part):
    stream: int
    problems: list[str] = Field(default_factory=list)
    files: list[str] = Field(default_factory=list)


class AnswerCell(Part):
    where: str
    lane: str = "candidate"
    kind: str = "prose"
    judged: int = 0
    broken: list[BrokenAnswer] = Field(default_factory=list)


class Answers(Part):
    cells: list[AnswerCell] = Field(default_factory=list)
    judged: int = 0
    broken: int = 0


# --- the record ------------------------------------------------------------------------------


class Record(WrittenRecord):
    """Everything the capacity stage measured, per lane and cell (`result.json`'s `data`)."""

    settings: CapacitySettings = Field(default_factory=CapacitySettings)
    lengths: dict[str, list[PlannedLength]] = Field(default_factory=dict)
    matrix: list[MatrixRow] = Field(default_factory=list)
    not_run: list[NotRun] = Field(default_factory=list)
    saturation: dict[str, dict[str, Saturation]] = Field(default_factory=dict)
    kinds: list[KindRow] = Field(default_factory=list)
    degenerate: list[DegenerateAnswer] = Field(default_factory=list)
    engine: Engine = Field(default_factory=Engine)
    slo: Slo | None = None
    load: Load = Field(default_factory=Load)
    answers: Answers = Field(default_factory=Answers)
    expected: list[ExpectedRange] = Field(default_factory=list)
    incumbent: Incumbent = Field(default_factory=Incumbent)
    comparison: list[Comparison] = Field(default_factory=list)
    order: list[str] = Field(default_factory=list)
    warmups: dict[str, list[Warmup]] = Field(default_factory=dict)
    plot: str = ""
    seed: int = 0
    wall_s: float = 0.0
    # The digest of the answer-checking code that judged it (`answers.answer_code`); none in a
    # record of an earlier build.
    check_code: str | None = None

    def cells(self, lane: str = "candidate") -> list[MatrixRow]:
        """The matrix rows of one lane."""
        return [r for r in self.matrix if r.lane == lane]
