"""The context stage: its spec (`SPEC`), what the registry and the rest of qualify read of it."""

from __future__ import annotations

from pathlib import Path

from qualify.context.settings import ContextSettings
from qualify.registry import StageParts, StageSpec


def parts() -> StageParts:
    from qualify.context import judges, rebuild, record, section, stage

    return StageParts.of(stage.context, record.Record, section, judges, rebuild=rebuild.rebuild)


SPEC = StageSpec(
    "context",
    parts,
    causes={  # each a name alone: which family a gate falls in never hangs on their order
        **{k: k for k in ("needles", "ruler", "garble", "degenerate", "acceptance-depth")},
        **dict.fromkeys(
            ("deep-typed-tools", "deep-streaming-tools", "deep-tool-result"), "deep-tools"
        ),
    },
    settings=ContextSettings,
    partial=Path(__file__).with_name("section.md.j2"),
)
