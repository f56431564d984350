"""The identity stage: its spec (`SPEC`), what the registry and the rest of qualify read of it."""

from __future__ import annotations

from pathlib import Path

from qualify.registry import StageParts, StageSpec


def parts() -> StageParts:
    from qualify.identity import judges, rebuild, record, section, stage

    return StageParts.of(
        stage.identity, record.Record, section, judges, again=rebuild.identity_again
    )


SPEC = StageSpec(
    "identity",
    parts,
    critical=True,
    causes={"*": "identity"},
    partial=Path(__file__).with_name("section.md.j2"),
)
