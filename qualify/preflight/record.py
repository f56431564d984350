"""The preflight stage's record (`data` of `preflight/result.json`): what its gates ran with
(levels, allowances, gate files), so the decision can tell a full run of the project's gate
files from a subset."""

from __future__ import annotations

from pydantic import ConfigDict, Field

from qualify.records import StageRecord, StrictModel


class Allowance(StrictModel):
    """The reasoning tokens a level's requests got on top of each answer budget, and where that
    figure came from (`qualify.preflight.budget.allowance`); written as `{"tokens", "from"}`."""

    model_config = ConfigDict(serialize_by_alias=True, validate_by_name=True)

    tokens: int
    source: str = Field(alias="from")


class Record(StageRecord):
    """What preflight ran: levels, allowances, and the gate files by sha256."""

    levels: list[str] = Field(default_factory=list)
    reasoning_allowance: dict[str, Allowance] = Field(default_factory=dict)
    gates_dir: str
    gate_files: dict[str, str] = Field(default_factory=dict)
    declared_gate_files: dict[str, str] = Field(default_factory=dict)
    # sha256 of the code the checks ran (`qualify.preflight.code.check_code`); absent in runs
    # made before it was kept (written back so), which `verify` judges again only where their
    # requests match.
    check_code: str | None = Field(default=None, exclude_if=lambda v: v is None)
