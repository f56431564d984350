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
    metrics: dict[str, Any] = Field(default_factory=dict)  # the gate's JSON figures, as written
    authoritative: GateVerdict
    superseded: list[GateVerdict] = Field(default_factory=list)
    tries: list[AttemptRecord] = Field(default_factory=list)
    waiver: str | None = None


class WaiverCheck(StrictModel):
    """One waiver the candidate listed, and whether it counts (qualify.decision.waivers)."""

    path: str
    sha256: str | None = None
    gate: str | None = None
    ticket: str | None = None
    expires: str | None = None
    signer: str | None = Field(default=None, description="name of the pinned approver key")
    signer_keyid: str | None = None
    signer_pem: str | None = Field(
        default=None,
        description="the approver key the waiver verified with at decision time, shown to a "
        "reader only: `verify` and `alias set` judge the waiver again with the key the house "
        "pins for its approver, never with this one",
    )
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
    verdict: Verdict = Field(
        description="worst-of over the required gates that were not waived (waived is not pass)"
    )
    reasons: list[str] = Field(default_factory=list, description="every blocking reason")
    notes: list[str] = Field(default_factory=list, description="advisory findings")
    stages: list[StageOutcome] = Field(default_factory=list)
    gates: list[GateOutcome] = Field(default_factory=list)
    missing: list[str] = Field(default_factory=list, description="required patterns, no gate")
    waived: list[str] = Field(default_factory=list, description="gate keys a waiver let through")


class HouseRef(StrictModel):
    """Where the policy came from: the house repository at one commit."""

    root: str | None = Field(description="the house repository; null: built-in defaults")
    commit: str | None = None
    policy_sha256: str = Field(description="sha256 of the house rules (canonical JSON)")
    rules: dict[str, Any] = Field(  # PolicyRules as JSON, as it was
        description="the house rules (PolicyRules), as they were"
    )
    accept: list[str] = Field(default_factory=list, description="earlier digests it accepts")


class DecisionRecord(StrictModel):
    version: Literal[2] = 2
    run_id: str
    candidate: str
    attempt: int = Field(description="the decision attempt this record is in")
    decision: Literal["promote", "no-promote"]
    headline: str = Field(description='e.g. "promote with 1 waiver (vram/telemetry ...)"')
    decided_at: str
    tool_version: str
    evaluation: Evaluation
    policy: dict[str, Any] = Field(  # PolicyRules as JSON, as it was
        description="the effective PolicyRules"
    )
    policy_sha256: str
    house: HouseRef
    candidate_path: str | None
    candidate_sha256: str | None
    candidate_copy: str | None = Field(description="the in-run copy, a path inside the run")
    record_attempt: str | None = Field(
        default=None, description="the invocation attempt open at decision time, signed with it"
    )
    evidence_root: str = Field(description="sha256 of the sorted `digest  path` evidence list")
    evidence_files: int
    unsealed: list[str] = Field(default_factory=list, description="attempts still open")
    integrity: list[str] = Field(default_factory=list, description="files that broke a manifest")
    tickets: list[TicketRef] = Field(default_factory=list)
    waivers: list[WaiverCheck] = Field(default_factory=list)

    @property
    def promote(self) -> bool:
        return self.decision == "promote"
