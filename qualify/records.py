"""Verdicts, gate results and stage results: the records every stage writes."""

from __future__ import annotations

from enum import StrEnum
from typing import Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
)


class StrictModel(BaseModel):
    """Base for every model read from or written to disk: unknown fields are errors."""

    model_config = ConfigDict(extra="forbid")


class Written(StrictModel):
    """A part of a stage record whose JSON form holds only the fields that were written: a
    field an earlier build did not write reads as its default and stays out of the JSON again,
    so a record reads every published result and writes back exactly what was written."""

    _always: ClassVar[tuple[str, ...]] = ()  # fields written whether given or not

    @model_serializer(mode="wrap")
    def _written(self, handler: SerializerFunctionWrapHandler) -> dict[str, object]:
        out: dict[str, object] = handler(self)
        fields = type(self).model_fields
        names = self.model_fields_set | set(self._always)
        kept = {fields[n].serialization_alias or fields[n].alias or n for n in names}
        return {k: v for k, v in out.items() if k in kept}


class CardWindow(Written):
    """One card over a stage part's window (`qualify.vram.sampler.CardWindow`): a context
    cell's timed sends, an A/B lane's timed run."""

    min_free_mib: float | None = None
    mean_power_w: float | None = None
    samples: int = 0


class PartGpu(Written):
    """The GPU figures of one marked part of a stage: the part of the sample log it marked,
    and each card's figures over it."""

    part: str = ""
    cards: dict[str, CardWindow] = Field(default_factory=dict)


class GpuNote(Written):
    """The house reserve a stage's per-part free memory is read against, and why no part has
    GPU figures (no telemetry); absent from records of builds that did not mark parts."""

    reserve_gib: float = 3.0
    why: str | None = None


class StageRecord(StrictModel):
    """What one stage measured, typed: written as `result.json`'s `data`, read back by the
    stage's judges, the decision, its plots, `render`, `verify` and `diff`.

    Each stage declares one subclass (`qualify.<stage>.record.Record`, named in the registry).
    `record_version` is the version of that stage's record: a reader refuses a version it does
    not know rather than guessing at its fields."""

    record_version: int = 1


class WrittenRecord(Written, StageRecord):
    """A stage record whose JSON form holds its version and only the fields that were written,
    as a `Written` part does: it reads every published result and writes back what was written."""

    _always = ("record_version",)


class Verdict(StrEnum):
    PASS = "pass"
    SKIPPED = "skipped"
    INCONCLUSIVE = "inconclusive"
    FAIL = "fail"
    ERROR = "error"


def worst(verdicts: list[Verdict] | tuple[Verdict, ...]) -> Verdict:
    """Worst-of combination; an empty list is skipped (nothing ran), never pass."""
    if not verdicts:
        return Verdict.SKIPPED
    return max(verdicts, key=list(Verdict).index)  # declared best to worst


Severity = Literal["required", "advisory"]


class AttemptRecord(StrictModel):
    """One attempt of one gate: its verdict, why, and the evidence files behind it."""

    number: int
    verdict: Verdict
    reasons: list[str] = Field(default_factory=list)
    files: list[str] = Field(default_factory=list)
    metrics: dict[str, object] = Field(default_factory=dict)


class GateResult(StrictModel):
    """The verdict of one gate (at one reasoning level, where the stage has levels)."""

    gate: str
    stage: str
    level: str | None = None
    severity: Severity = "required"
    critical: bool = False
    verdict: Verdict
    reasons: list[str] = Field(default_factory=list)
    attempts: list[AttemptRecord] = Field(default_factory=list)
    metrics: dict[str, object] = Field(default_factory=dict)

    @property
    def key(self) -> str:
        """The stable name of a gate in policies and decisions: `stage/gate[@level]`."""
        return f"{self.stage}/{self.gate}" + (f"@{self.level}" if self.level else "")


StageStatus = Literal["finished", "aborted"]


class StageResult(StrictModel):
    """What one attempt of one stage concluded; written as `result.json`."""

    version: Literal[1] = 1
    stage: str
    attempt: int
    status: StageStatus
    verdict: Verdict
    reasons: list[str] = Field(default_factory=list)
    gates: list[GateResult] = Field(default_factory=list)
    data: dict[str, Any] = Field(default_factory=dict)  # the StageRecord's JSON, as written
    started_at: str
    ended_at: str
    lane: str = "candidate"
