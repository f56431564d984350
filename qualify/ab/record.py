"""The A/B stage's record, typed: every part is `Written`, so a field an earlier build did not
write stays out of the JSON again and the JSON form is exactly what was written."""

from __future__ import annotations

from typing import Generic, Literal, TypeVar

from pydantic import Field

from qualify.ab.settings import ABSettings
from qualify.httpclient.timing import FidelitySummary, ServerComparison
from qualify.records import GpuNote, PartGpu, Written, WrittenRecord
from qualify.serving.idle import Idle

V = TypeVar("V")
LaneName = Literal["candidate", "control"]
LANES: tuple[LaneName, ...] = ("candidate", "control")


class Acceptance(Written):
    rate: float | None = None
    mean_length: float | None = None
    per_position: list[float] = Field(default_factory=list)
    drafts: int | None = None
    draft_tokens: int | None = None
    accepted: int | None = None
    accepted_per_position: list[int] = Field(default_factory=list)
    source: str = ""
    unmeasured: str | None = None

    @property
    def per_draft(self) -> float | None:
        """Accepted draft tokens per draft (the bonus token not counted), from the counters."""
        drafts = self.drafts or 0
        return self.accepted / drafts if self.accepted is not None and drafts > 0 else None


class ResponseDrafts(Written):
    """`qualify.ab.acceptance.response_drafts`: llama.cpp's per-response draft counts."""

    responses: int = 0
    responses_with_drafts: int = 0
    draft_n: int | None = None
    draft_n_accepted: int | None = None
    rate: float | None = None


class Request(Written):
    prompt: str
    kind: str = ""
    file: str = ""
    sent: dict[str, str] = Field(default_factory=dict)
    failed: str | None = None
    excluded: str | None = None
    degenerate: str | None = None
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None
    sse_chunks: int = 0
    token_chunks: int = 0
    chunks_per_token: float | None = None
    ttfo_s: float | None = None
    ttft_s: float | None = None
    generation_s: float | None = None
    e2e_s: float | None = None
    decode_tok_s: float | None = None
    effective_prefill_tok_s: float | None = None
    itl_p50_ms: float | None = None
    itl_p95_ms: float | None = None
    server_decode_tok_s: float | None = None
    server_prompt_ms: float | None = None
    decode_ratio_client_over_server: float | None = None
    ttft_minus_server_prompt_ms: float | None = None
    server_source: str | None = None
    network_chunks: int = 0
    decode_tok_s_if_chunks_counted: float | None = None
    draft_n: int | None = None
    draft_n_accepted: int | None = None
    content_sha256: str = ""
    visible_chars: int = 0
    reasoning_chars: int = 0


class RunP50(Written):
    decode_tok_s: float | None = None
    ttfo_s: float | None = None
    ttft_s: float | None = None
    generation_s: float | None = None
    e2e_s: float | None = None
    decode_tok_s_if_chunks_counted: float | None = None


class PromptWhy(Written):
    prompt: str
    why: str


class DegenerateAnswer(PromptWhy):
    file: str = ""


class CardEnergy(Written):
    joules: float | None = None
    why: str | None = None


class Energy(Written):
    """Energy over a lane's timed window (`qualify.vram.energy.window_energy`), per output
    token; `joules` None means unmeasured and `why` says why."""

    joules: float | None = None
    mean_power_w: float | None = None
    power_field: str | None = None
    why: str | None = None
    cards: dict[str, CardEnergy] = Field(default_factory=dict)
    window_s: float | None = None
    completion_tokens: int | None = None
    j_per_output_token: float | None = None


class Run(Written):
    run: int
    p50: RunP50 = Field(default_factory=RunP50)
    aggregate_output_tok_s: float | None = None
    wall_s: float = 0.0
    counted: int = 0
    failed: list[PromptWhy] = Field(default_factory=list)
    excluded: list[PromptWhy] = Field(default_factory=list)
    degenerate: list[DegenerateAnswer] = Field(default_factory=list)
    sse_chunks: int = 0
    token_chunks: int = 0
    completion_tokens: int = 0
    chunks_per_token: float | None = None
    acceptance: Acceptance | None = None
    per_response_drafts: ResponseDrafts = Field(default_factory=ResponseDrafts)
    metrics_scraped: bool = False
    # the engine's gauges around the run: `idle`, `running`, `waiting` and `waited_s` written
    idle_before: Idle = Field(default_factory=Idle)
    idle_after: Idle = Field(default_factory=Idle)
    server_histograms: ServerComparison | None = None
    energy: Energy | None = None
    gpu: PartGpu | None = None
    request_digest: str = ""
    warmup_files: list[str] = Field(default_factory=list)
    requests: list[Request] = Field(default_factory=list)


LaneRuns = dict[str, list[Run]]  # by lane name


class Speculation(Written):
    method: str = "none"
    draft_tokens: int | None = None
    draft_model: str | None = None


class PerMetric(Written, Generic[V]):
    """One value per metric of `qualify.ab.table.METRICS`: a lane's figure (`Figures`), or
    its run-to-run range [min, max] (`Spreads`, None without a run-level value)."""

    decode_tok_s: V | None = None
    aggregate_output_tok_s: V | None = None
    ttfo_s: V | None = None
    ttft_s: V | None = None
    generation_s: V | None = None
    e2e_s: V | None = None


Figures = PerMetric[float]
Spreads = PerMetric[list[float]]


class KvLog(Written):
    """Figures from the startup log (`qualify.ab.kv.from_log`, the engine adapter's
    `kv_log` patterns): a whole number reads as an int, else a float."""

    n_slots: int | float | None = None
    n_ctx_slot: int | float | None = None
    kv_buffer_mib: int | float | None = None
    k_size_gb: int | float | None = None
    v_size_gb: int | float | None = None
    kv_tokens: int | float | None = None
    kv_memory_gib: int | float | None = None
    max_concurrency: int | float | None = None
    max_total_num_tokens: int | float | None = None


class Kv(Written):
    gauges: dict[str, float] = Field(default_factory=dict)
    log: KvLog = Field(default_factory=KvLog)
    reported: bool = False
    note: str = ""


class LaneEnergy(Written):
    """A lane's energy over all its timed runs: J per output token, or why unmeasured."""

    joules: float | None = None
    completion_tokens: int = 0
    j_per_output_token: float | None = None
    runs: int = 0
    why: str | None = None


class Lane(Written):
    name: str = ""
    variable: str | None = None
    engine: str = ""
    speculation: Speculation = Field(default_factory=Speculation)
    runs: list[Run] = Field(default_factory=list)
    figure: Figures = Field(default_factory=Figures)
    spread: Spreads = Field(default_factory=Spreads)
    acceptance: Acceptance | None = None
    kv: Kv | None = None
    energy: LaneEnergy | None = None

    @property
    def drafts(self) -> bool:
        """Whether the lane's recipe uses speculative decoding."""
        return self.speculation.method.lower() not in ("none", "")


class Paired(Written):
    pairs: int = 0
    prompts: int = 0
    median_pct: float | None = None
    ci95_pct: list[float] | None = None
    too_few: bool = True
    why: str | None = None
    method: str = ""
    # the bootstrap distribution enumerated whole (`qualify.ab.stats.EXACT_MAX`); None in
    # records made before, whose interval is resampled (`method` names the count and seed)
    exact: bool | None = None


class RunsCounted(Written):
    candidate: int = 0
    control: int = 0


class MetricRow(Written):
    metric: str
    unit: str = ""
    better: Literal["higher", "lower"] = "higher"
    candidate: float | None = None
    control: float | None = None
    delta: float | None = None
    delta_pct: float | None = None
    ci95: list[float] | None = None
    within_noise: bool | None = None
    runs: RunsCounted = Field(default_factory=RunsCounted)
    paired: Paired | None = None


class Listed(Written):
    lane: LaneName
    run: int
    prompt: str
    why: str
    file: str | None = None


class Identical(Written):
    """Answers compared and how many were byte-identical: paired across the lanes
    (`Fidelity.identical_outputs`), or each lane's against its own first answer to each prompt
    (`Lossless.repeats`)."""

    pairs: int = 0
    identical: int = 0


class Divergence(Written):
    """A paired answer that differs between the lanes: from which of the control's tokens
    (`of` in all), and what each lane says from there."""

    run: int
    prompt: str
    token: int
    of: int
    control: str = ""
    candidate: str = ""


class Lossless(Written):
    pairs: int = 0
    identical: int = 0
    tokens: int = 0
    tokens_before: int = 0
    divergent: list[Divergence] = Field(default_factory=list)
    why: str | None = None
    # each lane against its own runs; None in a record made before (and in the draft: asked for)
    repeats: dict[str, Identical] | None = None

    @property
    def share(self) -> float | None:
        """Share of the control's compared tokens that came before each pair's divergence."""
        return self.tokens_before / self.tokens if self.tokens else None


class LaneFidelity(FidelitySummary):
    engine: str | None = None
    completion_tokens: int = 0
    token_chunks: int = 0
    chunks_per_token: float | None = None
    decode_tok_s: float | None = None
    decode_tok_s_if_chunks_counted: float | None = None
    chunk_counting_error_pct: float | None = None


class Fidelity(FidelitySummary):
    concurrency: int = 1
    identical_outputs: Identical = Field(default_factory=Identical)
    lanes: dict[LaneName, LaneFidelity] = Field(default_factory=dict)


class Settings(Written, ABSettings):
    """`stages.ab` as the run used it, only the fields it wrote."""

    seed: int | None = None  # a record that wrote none had none
    # an earlier build's setting, read back as written
    min_acceptance_rate: float | None = None


class PromptRef(Written):
    id: str
    kind: str = ""


class Record(WrittenRecord):
    """Both lanes, in turn, on the same prompts: their runs, the table and the cross-checks."""

    runs: int = 0
    order: list[LaneName] = Field(default_factory=list)
    settings: Settings | None = None
    prompts: list[PromptRef] = Field(default_factory=list)
    prompt_file: str = ""
    lanes: dict[LaneName, Lane] = Field(default_factory=dict)
    metrics: list[MetricRow] = Field(default_factory=list)
    acceptance: Acceptance | None = None
    excluded: list[Listed] = Field(default_factory=list)
    degenerate: list[Listed] = Field(default_factory=list)
    fidelity: Fidelity | None = None
    lossless: Lossless | None = None
    gpu: GpuNote | None = None
    no_control: str | None = None

    def row(self, metric: str) -> MetricRow | None:
        return next((m for m in self.metrics if m.metric == metric), None)
