"""Candidate settings owned by the decision: the policy, the alias it gates, the signing key."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from qualify.records import StrictModel

PositiveFloat = Annotated[float, Field(gt=0)]
PositiveInt = Annotated[int, Field(gt=0)]


class Policy(StrictModel):
    """How verdicts become a decision. Patterns are fnmatch over gate keys `stage/gate[@level]`."""

    vram_reserve_gib: Annotated[float, Field(ge=0)] = 3.0
    required: list[str] = Field(
        default_factory=lambda: ["identity/*", "preflight/*", "context/*", "ab/*", "vram/*"],
        description="gate key patterns (stage/gate@level, fnmatch) that must pass",
    )
    critical: list[str] = Field(
        default_factory=lambda: ["identity/*"],
        description="gate key patterns whose failure vetoes the decision on its own",
    )
    waivers: list[str] = Field(
        default_factory=list,
        description="paths of signed waivers (relative to the candidate file)",
    )
    waiver_keys: list[str] = Field(
        default_factory=list,
        description="ed25519 public keys (PEM paths) whose signature makes a waiver valid",
    )
    tickets_dir: str | None = Field(
        default=None,
        description="ticket directory (default: $QUALIFY_TICKETS, else tickets/ at the repo root)",
    )


class AliasTarget(StrictModel):
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9._-]*$")
    table: str = "aliases.toml"


class Signing(StrictModel):
    key: str | None = Field(default=None, description="path of the ed25519 private key")
