"""The candidate's `[stages]` table is assembled from the registry: one table per declared
stage with settings, in the registry's order; the typed view the type checker reads is the
generated one (`python -m qualify.assembled` rewrites it); the candidate model imports no
stage."""

from __future__ import annotations

import ast
from pathlib import Path

import qualify.assembled as assembled
import qualify.candidate as candidate
from qualify.ab.settings import ABSettings
from qualify.assembled import Stages, assemble, held_view, typed_view
from qualify.registry import (
    StageParts,
    StageSpec,
    register_stage,
    specs,
    stage_names,
    unregister_stage,
)


def test_the_typed_view_is_the_generated_one() -> None:
    held = held_view(Path(assembled.__file__).read_text())
    assert held == typed_view(), "stale: run `python -m qualify.assembled`"


def test_each_table_is_its_stages_settings_in_registry_order() -> None:
    expected = [n for n in stage_names() if specs()[n].settings is not None]
    assert list(Stages.model_fields) == ["run", *expected]
    for name in expected:
        assert Stages.model_fields[name].annotation is specs()[name].settings
    assert "identity" not in Stages.model_fields  # a stage without settings has no table


def test_a_stage_declared_with_settings_gets_its_table() -> None:
    spec = StageSpec("toytable", lambda: StageParts(run=print), settings=ABSettings)
    register_stage(spec, "vram")
    try:
        fields = list(assemble().model_fields)
        assert fields[fields.index("toytable") + 1] == "vram"
        assert assemble()(run=["toytable"]).run == ["toytable"]
    finally:
        unregister_stage("toytable")


def test_the_candidate_model_imports_no_stage() -> None:
    tree = ast.parse(Path(candidate.__file__).read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module} | {
        a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names
    }
    stages = {f"qualify.{name}" for name in stage_names()}
    upward = {m for m in imported if any(m == s or m.startswith(s + ".") for s in stages)}
    assert not upward, upward
