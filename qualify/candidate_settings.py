"""Candidate settings owned by the decision: its own policy, the alias it gates, the signing key.

A candidate's `[policy]` can only tighten the house policy (`qualify.trust.house`), which
lives with the alias table: every field it writes is compared with the house's and a loosening
is refused (exit 2) naming the field. Fields it does not write are the house's.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, ValidationError, field_validator, model_validator

from qualify.records import StrictModel

_HOUSE_ONLY = {
    "waiver_keys": "waiver approvers are pinned in the house repository "
    "(`qualify house pin --role waiver`), never named by a candidate",
    "accept": "which earlier house policies are still accepted is the house's to say",
    "waivers": "waivers live in the house repository, under waivers/<candidate>/ "
    "(`qualify tickets waive --house`), so listing one never changes the candidate's digest",
}


class Policy(StrictModel):
    """A candidate's tightenings of the house policy. Patterns are fnmatch over gate keys."""

    required: list[str] | None = Field(
        default=None,
        description="gate key patterns that must pass; must include every house pattern",
    )
    critical: list[str] | None = Field(
        default=None,
        description="gate key patterns that veto on their own; must include every house pattern",
    )
    levels: list[str] | None = Field(
        default=None,
        description="reasoning levels that must be covered; must include every house level",
    )
    thresholds: dict[str, object] | None = Field(
        default=None,
        description="a qualify.gates.thresholds.Thresholds table: only the fields written "
        "count, and each must be at least as strict as the house's",
    )
    vram_reserve_gib: Annotated[float, Field(ge=0)] = Field(
        3.0,
        description="shorthand for thresholds.vram_reserve_gib (counts only when written)",
    )
    tickets_dir: str | None = Field(
        default=None,
        description="ticket directory (default: $QUALIFY_TICKETS, else tickets/ at the repo root)",
    )

    @field_validator("thresholds")
    @classmethod
    def _thresholds(cls, v: dict[str, object] | None) -> dict[str, object] | None:
        # imported here: qualify.gates imports the candidate model, which imports this module
        from qualify.gates.thresholds import Thresholds

        if v is not None:
            try:
                Thresholds.model_validate(v)
            except ValidationError as exc:
                raise ValueError(
                    "; ".join(
                        f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()
                    )
                ) from None
        return v

    @model_validator(mode="before")
    @classmethod
    def _house_fields(cls, raw: object) -> object:
        if isinstance(raw, dict):
            for name, why in _HOUSE_ONLY.items():
                if name in raw:
                    raise ValueError(f"{name}: {why}")
        return raw


class AliasTarget(StrictModel):
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9._-]*$")
    table: str = "aliases.toml"


class Signing(StrictModel):
    key: str | None = Field(default=None, description="path of the ed25519 private key")
