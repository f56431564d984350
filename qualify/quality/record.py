"""The quality stage's record: the suite's scope and budgets, the gate files it ran, one line of
totals per lane and level, the table of tasks by attempts, every failing attempt's evidence and
how the control ran (`data` of `quality/result.json`; see docs/quality.md).

A stage that stopped at its gate files writes the first part only (levels to declared gate
files): the JSON form holds the fields that were written, plus `record_version`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from qualify.records import StrictModel, Verdict, Written, WrittenRecord

# What became of one attempt of a task (`qualify.quality.tasks`: `metrics["outcome"]`).
Outcome = Literal["pass", "wrong", "cut", "error", "not run"]


class TaskBudget(StrictModel):
    """A task's declared budgets and the budgets sent (after the candidate's scale)."""

    task: str
    check: str
    description: str
    attempts: int
    visible_tokens: int
    reasoning_tokens: int
    visible_budget: int
    reasoning_budget: int
    max_tokens: int


class TaskRow(StrictModel):
    """One task on one lane at one level: each declared attempt's outcome."""

    task: str
    lane: str
    level: str
    attempts: list[Outcome]


class Failure(StrictModel):
    """One attempt that did not pass, with the evidence files behind it."""

    task: str
    lane: str
    level: str
    attempt: int
    outcome: Outcome
    reasons: list[str] = Field(default_factory=list)
    evidence: list[str] = Field(default_factory=list)


class Control(Written):
    """Whether the control lane ran, at which level its tasks ran or why not, and its preflight
    verdicts: by `<gate>@<level>` at each of `preflight_levels` (every level the candidate
    declares that the control declares too); records made before it ran at more than one level
    have no `preflight_levels` and key `preflight` by gate, at `level`."""

    ran: bool
    level: str | None = None
    why_not: str | None = None
    preflight: dict[str, Verdict] = Field(default_factory=dict)
    preflight_levels: list[str] | None = None


class Record(WrittenRecord):
    """What the quality suite ran and how it went."""

    levels: list[str] = Field(default_factory=list)
    scope: str = ""
    budget_scale: float = 1.0
    budgets: list[TaskBudget] = Field(default_factory=list)
    gate_files: dict[str, str] = Field(default_factory=dict)
    declared_gate_files: dict[str, str] = Field(default_factory=dict)
    # sha256 of the code the checks ran (`qualify.preflight.code.check_code`); absent in runs
    # made before it was kept, which `verify` judges again only where their requests match.
    check_code: str | None = None
    # lane -> level -> outcome -> attempts, and a line of them per lane and level
    totals: dict[str, dict[str, dict[Outcome, int]]] = Field(default_factory=dict)
    lines: list[str] = Field(default_factory=list)
    table: list[TaskRow] = Field(default_factory=list)
    failures: list[Failure] = Field(default_factory=list)
    control: Control | None = None
