"""The JSON forms the A/B's measuring and rebuild pass around before its record is made: each
is the form of a `qualify.ab.record` part as written (`model_dump(mode="json")`), so the
record validates it unchanged. A form read back from a sealed record may lack the keys an
earlier build did not write (`total=False`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict
from typing import Literal, TypedDict, cast

from qualify.ab.record import Energy, LaneEnergy, Run
from qualify.httpclient.timing import RequestTiming, TimingForm

PerRequest = Literal["decode_tok_s", "ttfo_s", "ttft_s", "generation_s", "e2e_s"]
Metric = Literal[
    "decode_tok_s", "aggregate_output_tok_s", "ttfo_s", "ttft_s", "generation_s", "e2e_s"
]


class AcceptanceForm(TypedDict, total=False):
    """`qualify.ab.record.Acceptance`."""

    rate: float | None
    mean_length: float | None
    per_position: list[float]
    drafts: int | None
    draft_tokens: int | None
    accepted: int | None
    accepted_per_position: list[int]
    source: str
    unmeasured: str | None


class ResponseDraftsForm(TypedDict):
    """`qualify.ab.record.ResponseDrafts`."""

    responses: int
    responses_with_drafts: int
    draft_n: int | None
    draft_n_accepted: int | None
    rate: float | None


def timing_form(t: RequestTiming) -> RequestForm:
    """A request's timing in its record form (every field of the dataclass, as `asdict`)."""
    return cast(RequestForm, asdict(t))


def timing_from(q: RequestForm) -> RequestTiming:
    """A request record's timing, as `qualify.httpclient.timing.timing` measured it."""
    return RequestTiming(
        prompt_tokens=q["prompt_tokens"],
        completion_tokens=q["completion_tokens"],
        cached_tokens=q["cached_tokens"],
        sse_chunks=q["sse_chunks"],
        token_chunks=q["token_chunks"],
        chunks_per_token=q["chunks_per_token"],
        ttfo_s=q["ttfo_s"],
        ttft_s=q["ttft_s"],
        generation_s=q["generation_s"],
        e2e_s=q["e2e_s"],
        decode_tok_s=q["decode_tok_s"],
        effective_prefill_tok_s=q["effective_prefill_tok_s"],
        itl_p50_ms=q["itl_p50_ms"],
        itl_p95_ms=q["itl_p95_ms"],
        server_decode_tok_s=q["server_decode_tok_s"],
        server_prompt_ms=q["server_prompt_ms"],
        decode_ratio_client_over_server=q["decode_ratio_client_over_server"],
        ttft_minus_server_prompt_ms=q["ttft_minus_server_prompt_ms"],
        server_source=q["server_source"],
    )


class RequestForm(TimingForm, total=False):
    """`qualify.ab.record.Request`."""

    prompt: str
    kind: str
    file: str
    sent: dict[str, str]
    failed: str | None
    excluded: str | None
    degenerate: str | None
    finish_reason: str | None
    network_chunks: int
    decode_tok_s_if_chunks_counted: float | None
    draft_n: int | None
    draft_n_accepted: int | None
    content_sha256: str
    visible_chars: int
    reasoning_chars: int


class PromptWhyForm(TypedDict, total=False):
    """`qualify.ab.record.PromptWhy` and `DegenerateAnswer`."""

    prompt: str
    why: str | None
    file: str


class RunForm(TypedDict, total=False):
    """`qualify.ab.record.Run`."""

    run: int
    p50: dict[str, float | None]
    aggregate_output_tok_s: float | None
    wall_s: float
    counted: int
    failed: list[PromptWhyForm]
    excluded: list[PromptWhyForm]
    degenerate: list[PromptWhyForm]
    sse_chunks: int
    token_chunks: int
    completion_tokens: int
    chunks_per_token: float | None
    acceptance: AcceptanceForm | None
    per_response_drafts: ResponseDraftsForm
    metrics_scraped: bool
    idle_before: IdleForm
    idle_after: IdleForm
    server_histograms: dict[str, object]
    energy: Energy | dict[str, object]  # the stage's measured `Energy`, or its JSON as sealed
    gpu: dict[str, object]
    request_digest: str
    warmup_files: list[str]
    requests: list[RequestForm]


class IdleForm(TypedDict):
    """`qualify.ab.record.IdleState`."""

    idle: bool | None
    running: float | None
    waiting: float | None
    waited_s: float


Runs = list[RunForm]
"""One lane's runs."""
LaneRuns = dict[str, Runs]
"""Each lane's runs, by lane name."""


class KvForm(TypedDict):
    """`qualify.ab.record.Kv`: the KV cache gauges and the startup log's figures, by name."""

    gauges: dict[str, float]
    log: dict[str, int | float]
    reported: bool
    note: str


class DivergenceForm(TypedDict):
    """`qualify.ab.record.Divergence`."""

    run: int
    prompt: str
    token: int
    of: int
    control: str
    candidate: str


class RepeatsForm(TypedDict):
    """`qualify.ab.record.Repeats`."""

    pairs: int
    identical: int


class LosslessForm(TypedDict, total=False):
    """`qualify.ab.record.Lossless`."""

    pairs: int
    identical: int
    tokens: int
    tokens_before: int
    divergent: list[DivergenceForm]
    why: str
    repeats: dict[str, RepeatsForm] | None


def window_of(q: RequestForm) -> RequestForm:
    """A request's figures from a server's histograms over its run (`qualify.ab.drive.WINDOW`)."""
    return {
        "server_decode_tok_s": q.get("server_decode_tok_s"),
        "server_prompt_ms": q.get("server_prompt_ms"),
        "decode_ratio_client_over_server": q.get("decode_ratio_client_over_server"),
        "ttft_minus_server_prompt_ms": q.get("ttft_minus_server_prompt_ms"),
        "server_source": q.get("server_source"),
    }


def run_form(run: Run) -> RunForm:
    """A run of a record in its JSON form, as the record writes it."""
    return cast(RunForm, run.model_dump(mode="json"))


class PairedForm(TypedDict, total=False):
    """`qualify.ab.record.Paired`."""

    pairs: int
    prompts: int
    median_pct: float | None
    ci95_pct: list[float] | None
    too_few: bool
    why: str | None
    method: str
    exact: bool


class MetricRowForm(TypedDict, total=False):
    """`qualify.ab.record.MetricRow`."""

    metric: str
    unit: str
    better: str
    candidate: float | None
    control: float | None
    delta: float | None
    delta_pct: float | None
    ci95: list[float] | None
    within_noise: bool | None
    runs: dict[str, int]
    paired: PairedForm


class LaneForm(TypedDict, total=False):
    """`qualify.ab.record.Lane`."""

    name: str
    variable: str | None
    engine: str
    speculation: dict[str, object]
    runs: Runs
    figure: dict[str, float | None]
    spread: dict[str, list[float] | None]
    acceptance: AcceptanceForm | None
    kv: KvForm | None
    energy: LaneEnergy | dict[str, object]  # the stage's `LaneEnergy`, or its JSON as sealed


class ListedForm(TypedDict, total=False):
    """`qualify.ab.record.Listed`."""

    lane: str
    run: int
    prompt: str
    why: str | None
    file: str


class OverLanesForm(TypedDict):
    """What the record says over both lanes (`qualify.ab.table.over_lanes`)."""

    acceptance: AcceptanceForm | None
    excluded: list[ListedForm]
    degenerate: list[ListedForm]
    fidelity: dict[str, object]


class RecordForm(TypedDict, total=False):
    """`qualify.ab.record.Record` as sealed: what the rebuild reads back and writes again."""

    record_version: int
    runs: int
    order: list[str]
    settings: dict[str, object]
    prompts: list[dict[str, str]]
    prompt_file: str
    lanes: dict[str, LaneForm]
    metrics: list[MetricRowForm]
    acceptance: AcceptanceForm | None
    excluded: list[ListedForm]
    degenerate: list[ListedForm]
    fidelity: dict[str, object]
    lossless: LosslessForm | None
    gpu: dict[str, object]
    no_control: str | None


def record_form(sealed: Mapping[str, object]) -> RecordForm:
    """A sealed A/B record's JSON (`AttemptView.sealed`) in its form."""
    return cast(RecordForm, sealed)
