"""Capacity: the prompt × concurrency matrix, per-kind decode, engine capacity, incumbent.
Its spec, `SPEC`, is what the registry and the rest of qualify read of it."""

from __future__ import annotations

from pathlib import Path

from qualify.capacity.settings import CapacitySettings
from qualify.registry import StageParts, StageSpec


def parts() -> StageParts:
    from qualify.capacity import judges, rebuild, record, section, stage, traffic_judges

    return StageParts.of(
        stage.capacity, record.Record, section, judges, traffic_judges, rebuild=rebuild.rebuild
    )


SPEC = StageSpec(
    "capacity",
    parts,
    default=False,
    causes={
        "incumbent": "capacity-incumbent",
        "expected-range": "capacity-range",
        "degenerate": "degenerate",
        "answers": "load-answers",
        "goodput": "goodput",
        "soak": "soak",
        "soak-acceptance": "acceptance-drift",
        "replay": "trace-replay",
        "sessions": "agent-sessions",
        "harness": "load-harness",
    },
    # how capacity judges each answer under load (degenerate, garble, JSON, tool calls)
    check_code=("capacity/answers.py", "httpclient/degenerate.py", "preflight/checks/text.py"),
    required=False,
    settings=CapacitySettings,
    partial=Path(__file__).with_name("section.md.j2"),
)
