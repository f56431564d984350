"""The identity stage's record: every pin as pinned, as seen (value, source, proof), or why it
could not be seen, and how qualify launched the server (`data` of `identity/result.json`)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, JsonValue

from qualify.candidate import Engine, Identity
from qualify.records import StageRecord, StrictModel
from qualify.serving.identity import ProvedBy, Seen
from qualify.serving.lanes import Launched


class Fingerprint(StrictModel):
    """vLLM's `system_fingerprint` `vllm-<version>-<hash>`, split."""

    version: str
    config_hash: str


class LaunchShown(StrictModel):
    """How qualify started the server: local process or container, and its argv."""

    kind: Literal["local", "container"]
    args: list[str]


class Record(StageRecord):
    """What identity saw of the server, pin by pin."""

    # The engine pinned (`pins.engine`); records of early builds did not write it.
    engine: Engine | None = None
    unreachable: str | None = None
    pins: Identity
    seen: dict[str, Seen] = Field(default_factory=dict)
    proved_by: dict[str, ProvedBy] = Field(default_factory=dict)
    fingerprint: Fingerprint | None = None
    unverifiable: dict[str, str] = Field(default_factory=dict)
    # The value of every pin seen, as in `seen` (the server's own words).
    reported: dict[str, JsonValue] = Field(default_factory=dict)
    not_reported: list[str] = Field(default_factory=list)
    launch: LaunchShown | None = None
    launches: list[Launched] = Field(default_factory=list)
    # The pins the recipe leaves unset (image_digest): nothing claimed, so nothing to verify.
    # Records of earlier builds did not write it, and were judged as if every pin were set.
    unpinned: list[str] | None = Field(default=None, exclude_if=lambda v: v is None)
