"""The candidate model reads its stages from the registry: `stages.run` accepts a declared stage
and refuses another on one line (file path, field path, what was expected), its default is the
registry's, and every settings table is a declared stage's."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from qualify.candidate import Stages
from qualify.errors import format_validation_error
from qualify.registry import (
    StageParts,
    StageSpec,
    default_run,
    register_stage,
    stage_names,
    unregister_stage,
)


def test_the_default_run_is_the_registrys() -> None:
    assert Stages().run == default_run()


def test_every_settings_table_is_a_declared_stage() -> None:
    tables = set(Stages.model_fields) - {"run"}
    assert tables <= set(stage_names()), tables - set(stage_names())


def test_run_refuses_an_undeclared_stage_on_one_line() -> None:
    with pytest.raises(ValidationError) as info:
        Stages(run=["identity", "contxt"])
    (line,) = format_validation_error(info.value)
    assert line.startswith("run.1: Input should be 'identity', 'preflight'")
    assert line.endswith("(got 'contxt')")


def test_run_accepts_a_stage_declared_by_its_registry_line_alone() -> None:
    register_stage(StageSpec("toyrun", lambda: StageParts(run=print), default=False), "vram")
    try:
        assert Stages(run=["identity", "toyrun"]).run == ["identity", "toyrun"]
    finally:
        unregister_stage("toyrun")
    with pytest.raises(ValidationError):
        Stages(run=["toyrun"])
