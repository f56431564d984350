"""The bounded quality suite: agent-shaped tasks (`gates/quality/*.yaml`), three attempts each,
deterministic checks; its spec (`SPEC`), what the registry and the rest of qualify read of it."""

from __future__ import annotations

from pathlib import Path

from qualify.quality.settings import QualitySettings
from qualify.registry import StageParts, StageSpec


def parts() -> StageParts:
    from qualify.quality import checks, rebuild, record, section, stage

    return StageParts.of(stage.quality, record.Record, section, checks, rebuild=rebuild.rebuild)


SPEC = StageSpec(
    "quality",
    parts,
    gates="probe",
    causes={"*": "fitness"},
    check_code=(
        "quality/checks",
        "quality/tasks.py",
        "preflight/checks",
        "preflight/budget.py",
        "gates/probe.py",
        "gates/runner.py",
        "httpclient/chat.py",
    ),
    required=False,
    settings=QualitySettings,
    partial=Path(__file__).with_name("section.md.j2"),
)
