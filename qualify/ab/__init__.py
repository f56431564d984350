"""The paired speculative-decoding A/B: prompts, driving one run, lane tables, KV capacity.
Its spec, `SPEC`, is what the registry and the rest of qualify read of it."""

from __future__ import annotations

from pathlib import Path

from qualify.ab.settings import ABSettings
from qualify.registry import StageParts, StageSpec


def parts() -> StageParts:
    from qualify.ab import judges, rebuild, record, section, stage

    return StageParts.of(stage.ab, record.Record, section, judges, rebuild=rebuild.rebuild)


SPEC = StageSpec(
    "ab",
    parts,
    lead=True,
    causes={
        **dict.fromkeys(("decode", "e2e", "spec-speedup", "ttft", "ttfo", "aggregate"), "ab-speed"),
        **dict.fromkeys(("acceptance", "draft-length"), "drafting"),
    },
    settings=ABSettings,
    partial=Path(__file__).with_name("section.md.j2"),
)
