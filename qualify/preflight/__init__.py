"""The preflight stage: its spec (`SPEC`), what the registry and the rest of qualify read of it."""

from __future__ import annotations

from pathlib import Path

from qualify.preflight.settings import PreflightSettings
from qualify.registry import StageParts, StageSpec


def parts() -> StageParts:
    from qualify.preflight import checks, rebuild, record, section, stage

    return StageParts.of(stage.preflight, record.Record, section, checks, rebuild=rebuild.rebuild)


SPEC = StageSpec(
    "preflight",
    parts,
    gates="probe",
    causes={"*": "fitness"},
    check_code=(
        "preflight/checks",
        "preflight/budget.py",
        "gates/probe.py",
        "gates/runner.py",
        "httpclient/chat.py",
    ),
    settings=PreflightSettings,
    partial=Path(__file__).with_name("section.md.j2"),
)
