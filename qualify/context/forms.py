"""The JSON forms the context ladder and its rebuild pass around before the record is made:
each is the form of a `qualify.context.record` part as written (`model_dump(mode="json")`,
`pass` by its alias), so the record validates it unchanged. A form read back from a sealed
record may lack the keys an earlier build did not write (`total=False`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, TypedDict, cast

from qualify.ab.acceptance import AcceptanceForm
from qualify.context.tasks import TaskKind

PromptKey = Literal["ttfo_s", "ttft_s", "effective_prefill_tok_s"]
DecodeKey = Literal["decode_tok_s", "generation_s", "e2e_s", "itl_p50_ms", "itl_p95_ms"]


class StreamForm(TypedDict, total=False):
    """`qualify.context.record.Stream`."""

    actual_prompt_tokens: int | None
    cached_tokens: int | None
    completion_tokens: int | None
    ttfo_s: float | None
    ttft_s: float | None
    effective_prefill_tok_s: float | None
    decode_tok_s: float | None
    generation_s: float | None
    e2e_s: float | None
    itl_p50_ms: float | None
    itl_p95_ms: float | None
    sse_chunks: int
    chunks_per_token: float | None
    finish_reason: str | None
    needles: dict[str, bool]
    tasks: dict[str, dict[str, object]]
    answer: str
    degenerate: str | None
    reasoning: str
    problem: str | None
    server: dict[str, float | None]
    files: list[str]


class DegenerateMarkForm(TypedDict):
    """`qualify.context.record.DegenerateMark`."""

    stream: int
    reason: str | None


RowForm = TypedDict(
    "RowForm",
    {
        "target": int,
        "pass": str,
        "content": str,
        "concurrency": int,
        "planned_tokens": int,
        "sized_tokens": int,
        "idle": dict[str, dict[str, object]],
        "streams": list[StreamForm],
        "ttfo_s": float | None,
        "ttft_s": float | None,
        "effective_prefill_tok_s": float | None,
        "decode_tok_s": float | None,
        "generation_s": float | None,
        "e2e_s": float | None,
        "itl_p50_ms": float | None,
        "itl_p95_ms": float | None,
        "actual_prompt_tokens": int | None,
        "cached_tokens": int | None,
        "completion_tokens": int | None,
        "aggregate_output_tok_s": float | None,
        "degenerate": list[DegenerateMarkForm],
        "notes": list[str],
        "needles": dict[str, bool],
        "answer": str,
        "cached_tokens_metric_delta": float | None,
        "server_window": dict[str, object] | None,
        "acceptance": AcceptanceForm,
        "gpu": dict[str, object],
        "verdict": str,
        "reasons": list[str],
    },
    total=False,
)
"""`qualify.context.record.Row`."""


class NeedleForm(TypedDict):
    """`qualify.context.record.NeedleInfo`."""

    depth: int
    subject: str
    value: str


class TaskForm(TypedDict, total=False):
    """`qualify.context.record.TaskInfo`."""

    kind: TaskKind
    depths: list[int]
    lines: list[list[int | str]]  # [depth %, line]
    question: str
    expect: list[str]
    forbid: list[str]
    count: int | None


class WarmupForm(TypedDict, total=False):
    """`qualify.context.record.Warmup`."""

    n: int
    problem: str | None
    answer: str
    prompt_tokens: int | None
    cached_tokens: int | None
    e2e_s: float | None
    files: list[str]


AskedForm = TypedDict(
    "AskedForm",
    {
        "kind": TaskKind,
        "pass": str,
        "form": str,
        "problem": str | None,
        "finish_reason": str | None,
        "prompt_tokens": int | None,
        "cached_tokens": int | None,
        "completion_tokens": int | None,
        "answer": str,
        "check": dict[str, object],
        "files": list[str],
    },
    total=False,
)
"""`qualify.context.record.Asked`."""


class ContentForm(TypedDict, total=False):
    """`qualify.context.record.Content`."""

    sizing: dict[str, object]
    tokenizer_calls: int
    method: str
    passes: int
    needle_depths: dict[str, float]
    needles: list[NeedleForm]
    tasks: list[TaskForm]
    tasks_note: str | None
    question: str | None
    warmups: list[WarmupForm]
    cold_fits: list[dict[str, object]]
    asked: list[AskedForm]


class RungForm(TypedDict, total=False):
    """`qualify.context.record.Rung`."""

    target: int
    planned_tokens: int
    clamped: bool
    window: int
    same_as: int | None
    wall_s: float
    contents: dict[str, ContentForm]
    errors: list[str]


class CaseForm(TypedDict, total=False):
    """`qualify.context.record.Case`."""

    case: Literal["typed", "streaming", "tool-result"]
    problem: str | None
    http_status: int | None
    finish_reason: str | None
    tool_calls: list[dict[str, int | str | None]]
    answer: str
    reasoning_chars: int
    prompt_tokens: int | None
    cached_tokens: int | None
    completion_tokens: int | None
    sse_chunks: int
    files: list[str]


class BatteryForm(TypedDict, total=False):
    """`qualify.context.record.Battery`."""

    target: int
    planned_tokens: int
    content: str
    tools: list[dict[str, object]]
    cases: list[CaseForm]
    errors: list[str]
    tokenizer_calls: int
    sizing: dict[str, object]


class PassSpeedForm(TypedDict):
    """`qualify.context.record.PassSpeed`."""

    streams: int
    degenerate_left_out: int
    decode_tok_s_median: float | None
    decode_tok_s_p5: float | None
    decode_tok_s_p95: float | None
    decode_tok_s_median_by_rung: dict[str, float | None]


AuditForm = TypedDict(
    "AuditForm",
    {
        "target": int,
        "planned_tokens": int,
        "content": str,
        "kind": str,
        "pass": str,
        "form": str,
        "depths": list[int],
        "asked": int,
        "passed": int,
    },
)
"""`qualify.context.record.AuditCount`."""

DegenerateStreamForm = TypedDict(
    "DegenerateStreamForm",
    {
        "target": int,
        "planned_tokens": int,
        "pass": str,
        "content": str,
        "concurrency": int,
        "stream": int,
        "reason": str | None,
        "answer": str,
        "decode_tok_s": float | None,
        "files": list[str],
    },
)
"""`qualify.context.record.DegenerateStream`."""


class RecordForm(TypedDict, total=False):
    """`qualify.context.record.Record` as sealed: what the rebuild reads back and writes."""

    record_version: int
    targets: list[RungForm]
    rows: list[RowForm]
    tokenizer_calls: dict[str, int]
    cold_tokenizer_calls: dict[str, int]
    fidelity: dict[str, object]
    degenerate: list[DegenerateStreamForm]
    speed: dict[str, PassSpeedForm]
    audits: dict[str, list[AuditForm]]
    battery: BatteryForm | None
    level: str
    window: int | None
    window_source: str
    sizing_method: str | None
    seed: int
    gpu: dict[str, object] | None
    wall_s: float


def record_form(sealed: Mapping[str, object]) -> RecordForm:
    """A sealed context record's JSON (`AttemptView.sealed`) in its form."""
    return cast(RecordForm, sealed)
