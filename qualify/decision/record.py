"""The records a decision is made of; `decision.json` is a `DecisionRecord`."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from qualify.records import AttemptRecord, StrictModel, Verdict

GateStatus = Literal["pass", "blocks", "vetoes", "waived", "advisory"]


class AttemptRef(StrictModel):
    """One attempt of one stage, as the decision saw it."""

    attempt: int
    status: Literal["finished", "aborted", "no result"]
    verdict: Verdict | None = None
    reasons: list[str] = Field(default_factory=list)
    started_at: str | None = None
    ended_at: str | None = None


class StageOutcome(StrictModel):
    stage: str
    planned: bool
    ran: bool
    why_not: str | None = None
    authoritative: AttemptRef | None = None
    superseded: list[AttemptRef] = Field(default_factory=list)


class GateVerdict(StrictModel):
    """A gate's verdict in one stage attempt."""

    attempt: int
    verdict: Verdict | None = Field(description="null: the gate is absent from that attempt")


class GateOutcome(StrictModel):
    key: str
    stage: str
    gate: str
    level: str | None = None
    verdict: Verdict
    required: bool
    critical: bool
    status: GateStatus
    reasons: list[str] = Field(default_factory=list)
    metrics: dict[str, Any] = Field(default_factory=dict)
    authoritative: GateVerdict
    superseded: list[GateVerdict] = Field(default_factory=list)
    tries: list[AttemptRecord] = Field(default_factory=list)
    waiver: str | None = None


class WaiverCheck(StrictModel):
    path: str
    sha256: str | None = None
    gate: str | None = None
    ticket: str | None = None
    accepted: bool
    why: str
    evidence: str | None = Field(default=None, description="its copy in the decision attempt")


class TicketRef(StrictModel):
    id: str
    title: str
    status: str
    gate: str
    opened: str
    closed: str | None = None
    fix: str | None = None
    attempts: int
    action: str = Field(description="opened | appended | already logged | listed")


class Evaluation(StrictModel):
    promote: bool
    verdict: Verdict = Field(description="worst-of over the required gates (waived counts pass)")
    reasons: list[str] = Field(default_factory=list, description="every blocking reason")
    notes: list[str] = Field(default_factory=list, description="advisory findings")
    stages: list[StageOutcome] = Field(default_factory=list)
    gates: list[GateOutcome] = Field(default_factory=list)
    missing: list[str] = Field(default_factory=list, description="required patterns, no gate")


class DecisionRecord(StrictModel):
    version: Literal[1] = 1
    run_id: str
    candidate: str
    attempt: int = Field(description="the decision attempt this record is in")
    decision: Literal["promote", "no-promote"]
    decided_at: str
    tool_version: str
    evaluation: Evaluation
    policy: dict[str, Any]
    policy_sha256: str
    candidate_path: str | None
    candidate_sha256: str | None
    evidence_root: str = Field(description="sha256 of the sorted `digest  path` evidence list")
    evidence_files: int
    unsealed: list[str] = Field(default_factory=list, description="attempts still open")
    integrity: list[str] = Field(default_factory=list, description="files that broke a manifest")
    tickets: list[TicketRef] = Field(default_factory=list)
    waivers: list[WaiverCheck] = Field(default_factory=list)

    @property
    def promote(self) -> bool:
        return self.decision == "promote"
