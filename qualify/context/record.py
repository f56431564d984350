"""The context stage's record: what `qualify.context.stage` measured, typed (`data`).

Every part is `Written` (`qualify.httpclient.timing`): a field an earlier build did not write
reads as its default and stays out of the JSON again, so the JSON form is exactly what was
written. The judges (`qualify.context.judges`) and the decision read these attributes.
"""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field, JsonValue

from qualify.ab.record import Acceptance
from qualify.httpclient.timing import FidelitySummary, ServerComparison
from qualify.records import GpuNote, PartGpu, Written, WrittenRecord
from qualify.serving.idle import IdleAround

Pass = Literal["warm", "cold"]
PASSES: tuple[Pass, ...] = ("warm", "cold")


class Aliased(Written):
    """A part with a `pass_` field, written as `pass`."""

    model_config = ConfigDict(populate_by_name=True, serialize_by_alias=True)


class TaskCheck(Written):
    """`qualify.context.tasks.Task.check` (and `numbered` in a combined answer)."""

    passed: bool = False
    expected: int | list[str] | None = None
    said: int | None = None
    missed: list[str] = Field(default_factory=list)
    wrong: list[str] = Field(default_factory=list)
    numbered: bool = False


class StreamServer(Written):
    decode_tok_s: float | None = None
    prompt_ms: float | None = None
    decode_ratio: float | None = None
    ttft_minus_server_prompt_ms: float | None = None


class Stream(Written):
    """One stream of a timed cell (`qualify.context.ladder.stream_row`)."""

    actual_prompt_tokens: int | None = None
    cached_tokens: int | None = None
    completion_tokens: int | None = None
    ttfo_s: float | None = None
    ttft_s: float | None = None
    effective_prefill_tok_s: float | None = None
    decode_tok_s: float | None = None
    generation_s: float | None = None
    e2e_s: float | None = None
    itl_p50_ms: float | None = None
    itl_p95_ms: float | None = None
    sse_chunks: int = 0
    chunks_per_token: float | None = None
    finish_reason: str | None = None
    needles: dict[str, bool] = Field(default_factory=dict)
    tasks: dict[str, TaskCheck] = Field(default_factory=dict)
    answer: str = ""
    degenerate: str | None = None
    reasoning: str = ""
    problem: str | None = None
    server: StreamServer = Field(default_factory=StreamServer)
    files: list[str] = Field(default_factory=list)


class DegenerateMark(Written):
    stream: int
    reason: str


class Row(Aliased):
    """One timed cell (`qualify.context.ladder.run_cell`; its figures `qualify.context.rebuild`)."""

    target: int
    pass_: Pass = Field(alias="pass")
    content: str
    concurrency: int
    planned_tokens: int
    sized_tokens: int = 0
    idle: IdleAround = Field(default_factory=IdleAround)
    streams: list[Stream] = Field(default_factory=list)
    ttfo_s: float | None = None
    ttft_s: float | None = None
    effective_prefill_tok_s: float | None = None
    decode_tok_s: float | None = None
    generation_s: float | None = None
    e2e_s: float | None = None
    itl_p50_ms: float | None = None
    itl_p95_ms: float | None = None
    actual_prompt_tokens: int | None = None
    cached_tokens: int | None = None
    completion_tokens: int | None = None
    aggregate_output_tok_s: float | None = None
    degenerate: list[DegenerateMark] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    needles: dict[str, bool] = Field(default_factory=dict)
    answer: str = ""
    cached_tokens_metric_delta: float | None = None
    server_window: ServerComparison | None = None
    # draft acceptance between the idle scrapes around the cell; None in a record made before
    acceptance: Acceptance | None = None
    gpu: PartGpu | None = None
    verdict: str = ""
    reasons: list[str] = Field(default_factory=list)

    @property
    def where(self) -> str:
        return f"{self.pass_} {self.content} c={self.concurrency}"


class Sizing(Written):
    """What `qualify.context.sizing.size` found (the battery's adds `typed_tokens`)."""

    chars: int = 0
    tokens: int = 0
    calls: int = 0
    steps: list[list[int]] = Field(default_factory=list)
    within_tolerance: bool = False
    typed_tokens: int | None = None


class NonceCount(Written):
    nonce: str
    chars: int
    tokens: int


class ColdFit(Written):
    """A cold prompt re-counted behind its nonce (`qualify.context.sizing.fit`)."""

    tokens: int = 0
    want: int = 0
    exact: bool = False
    chars: int = 0
    calls: int = 0
    counts: list[NonceCount] = Field(default_factory=list)

    @property
    def nonce(self) -> str:
        """The nonce of the count that won (the first of its body length and tokens)."""
        return next(
            c.nonce for c in self.counts if (c.chars, c.tokens) == (self.chars, self.tokens)
        )


class NeedleInfo(Written):
    depth: int
    subject: str = ""
    value: str = ""


class TaskInfo(Written):
    """One hidden task of a document (`qualify.context.tasks.Task`)."""

    kind: str
    depths: list[int] = Field(default_factory=list)
    lines: list[tuple[int, str]] = Field(default_factory=list)
    question: str = ""
    expect: list[str] = Field(default_factory=list)
    forbid: list[str] = Field(default_factory=list)
    count: int | None = None


class Warmup(Written):
    n: int
    problem: str | None = None
    answer: str = ""
    prompt_tokens: int | None = None
    cached_tokens: int | None = None
    e2e_s: float | None = None
    files: list[str] = Field(default_factory=list)


class Asked(Aliased):
    """A task asked on its own behind the cached document (`Ladder.ask`)."""

    kind: str
    pass_: Pass = Field("warm", alias="pass")
    form: str = "own question"
    problem: str | None = None
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    cached_tokens: int | None = None
    completion_tokens: int | None = None
    answer: str = ""
    check: TaskCheck = Field(default_factory=TaskCheck)
    files: list[str] = Field(default_factory=list)


class Content(Written):
    """One content kind of a rung: how its prompt was sized, its needles, tasks and warm-ups."""

    sizing: Sizing = Field(default_factory=Sizing)
    tokenizer_calls: int = 0
    method: str = ""
    passes: int = 0
    needle_depths: dict[str, float] = Field(default_factory=dict)
    needles: list[NeedleInfo] = Field(default_factory=list)
    tasks: list[TaskInfo] = Field(default_factory=list)
    tasks_note: str | None = None
    question: str | None = None
    warmups: list[Warmup] = Field(default_factory=list)
    cold_fits: list[ColdFit] = Field(default_factory=list)
    asked: list[Asked] = Field(default_factory=list)


class Rung(Written):
    """One target of the ladder (`qualify.context.stage.plan_targets`)."""

    target: int
    planned_tokens: int
    clamped: bool = False
    window: int = 0
    same_as: int | None = None
    wall_s: float = 0.0
    contents: dict[str, Content] = Field(default_factory=dict)
    errors: list[str] = Field(default_factory=list)

    @property
    def part(self) -> str:
        """The gate part naming the rung: the size it ran at, else its target."""
        return str(self.planned_tokens if self.planned_tokens > 0 else self.target)


class Fidelity(FidelitySummary):
    """Over every counted stream, with the engine and per concurrency."""

    engine: str = ""
    by_concurrency: dict[str, FidelitySummary] = Field(default_factory=dict)


class DegenerateStream(Aliased):
    """A stream whose answer is degenerate (`qualify.context.rebuild.degenerate_streams`)."""

    target: int
    planned_tokens: int
    pass_: Pass = Field(alias="pass")
    content: str
    concurrency: int
    stream: int
    reason: str
    answer: str = ""
    decode_tok_s: float | None = None
    files: list[str] = Field(default_factory=list)


class PassSpeed(Written):
    streams: int = 0
    degenerate_left_out: int = 0
    decode_tok_s_median: float | None = None
    decode_tok_s_p5: float | None = None
    decode_tok_s_p95: float | None = None
    decode_tok_s_median_by_rung: dict[str, float | None] = Field(default_factory=dict)


class Speed(Written):
    warm: PassSpeed = Field(default_factory=PassSpeed)
    cold: PassSpeed = Field(default_factory=PassSpeed)


class AuditCount(Aliased):
    """Per rung, content, task kind, pass and form: answers asked and right."""

    target: int
    planned_tokens: int
    content: str
    kind: str
    pass_: Pass = Field(alias="pass")
    form: str
    depths: list[int] = Field(default_factory=list)
    asked: int = 0
    passed: int = 0


class Audits(Written):
    by_kind: list[AuditCount] = Field(default_factory=list)


class ToolCallRecord(Written):
    """`qualify.httpclient.chat.ToolCall.as_dict`: one call as the stream reassembled it."""

    index: int = 0
    id: str | None = None
    name: str | None = None
    arguments: str = ""


class Case(Written):
    """What the server answered to one case of the tool battery (`battery.record`)."""

    case: Literal["typed", "streaming", "tool-result"]
    problem: str | None = None
    http_status: int | None = None
    finish_reason: str | None = None
    tool_calls: list[ToolCallRecord] = Field(default_factory=list)
    answer: str = ""
    reasoning_chars: int = 0
    prompt_tokens: int | None = None
    cached_tokens: int | None = None
    completion_tokens: int | None = None
    sse_chunks: int = 0
    files: list[str] = Field(default_factory=list)


class Battery(Written):
    """The deep tool battery (`Ladder.tool_battery`)."""

    target: int
    planned_tokens: int
    content: str = ""
    # The typed tools as the gate folder declares them: OpenAI tool objects with JSON Schema
    # parameters, sent to the server as they are.
    tools: list[dict[str, JsonValue]] = Field(default_factory=list)
    cases: list[Case] = Field(default_factory=list)
    errors: list[str] = Field(default_factory=list)
    tokenizer_calls: int = 0
    sizing: Sizing | None = None


class Record(WrittenRecord):
    """The context ladder: rungs, timed cells, and the figures and audits over them."""

    targets: list[Rung] = Field(default_factory=list)
    rows: list[Row] = Field(default_factory=list)
    tokenizer_calls: dict[str, int] = Field(default_factory=dict)
    cold_tokenizer_calls: dict[str, int] = Field(default_factory=dict)
    fidelity: Fidelity = Field(default_factory=Fidelity)
    degenerate: list[DegenerateStream] = Field(default_factory=list)
    speed: Speed | None = None
    audits: Audits | None = None
    battery: Battery | None = None
    level: str = ""
    window: int | None = None
    window_source: str = ""
    sizing_method: str | None = None
    seed: int = 0
    gpu: GpuNote | None = None
    wall_s: float = 0.0

    @property
    def rungs(self) -> list[Rung]:
        """The rungs that ran: a target clamped to the size of an earlier rung is not run."""
        return [t for t in self.targets if t.same_as is None]
