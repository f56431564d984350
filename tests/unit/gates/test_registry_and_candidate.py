"""The candidate model names the same stages as the registry, until it is built from it: a stage
declared in `qualify/registry.py` and missing from `qualify/candidate.py` (or the other way
round) fails here, naming which."""

from __future__ import annotations

from typing import get_args

from qualify.candidate import StageName, Stages
from qualify.registry import default_run, stage_names


def test_stage_name_lists_the_declared_stages() -> None:
    assert sorted(get_args(StageName)) == sorted(stage_names())


def test_the_default_run_is_the_registrys() -> None:
    assert Stages().run == default_run()


def test_every_settings_table_is_a_declared_stage() -> None:
    tables = set(Stages.model_fields) - {"run"}
    assert tables <= set(stage_names()), tables - set(stage_names())
