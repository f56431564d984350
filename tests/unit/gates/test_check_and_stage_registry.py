"""The registries: a check name is taken once; every stage is declared once, in one place, and
the gate machinery's lists of stages are that declaration."""

from __future__ import annotations

import pytest

from qualify.gates.files import GateFile, gate_file_schema
from qualify.gates.registry import CHECKS, CheckSpec, Outcome, check, load_checks
from qualify.preflight.checks.smoke import SmokeParams, smoke
from qualify.registry import (
    StageParts,
    StageSpec,
    default_run,
    judged_stages,
    probe_stages,
    register_stage,
    run_order,
    stage_names,
)
from qualify.stage import STAGES, load_all


def test_a_duplicate_check_name_is_refused() -> None:
    load_checks()
    before = CHECKS["smoke"]

    async def impostor(ctx: object, p: SmokeParams) -> Outcome:
        return Outcome.passed()

    with pytest.raises(ValueError, match="check 'smoke': expected a new check name"):
        check("smoke", SmokeParams)(impostor)
    assert CHECKS["smoke"] is before  # not overwritten
    with pytest.raises(ValueError, match="check 'smoke': expected a new check name"):
        CHECKS["smoke"] = CheckSpec("smoke", SmokeParams, impostor, "")  # however it is set
    assert CHECKS["smoke"] is before


def test_the_same_check_registered_again_is_not_a_duplicate() -> None:
    """A module imported twice registers its own functions again: that is no conflict."""
    load_checks()
    check("smoke", SmokeParams)(smoke)
    assert CHECKS["smoke"].fn is smoke


def test_the_stages_in_order() -> None:
    assert stage_names() == (
        "identity",
        "preflight",
        "quality",
        "context",
        "capacity",
        "ab",
        "vram",
    )
    assert stage_names()[-1] == "vram"  # it judges the sampler's series of every stage
    assert "capacity" not in default_run()
    assert set(judged_stages()) == {"identity", "context", "ab", "capacity", "vram"}
    assert probe_stages() == ("preflight", "quality")


def test_vram_runs_last_wherever_it_is_listed() -> None:
    assert run_order(["vram", "identity", "ab"]) == ["identity", "ab", "vram"]
    assert run_order(["context", "identity"]) == ["context", "identity"]


def test_every_declared_stage_has_its_function_and_checks() -> None:
    load_all()
    load_checks()
    assert set(STAGES) == set(stage_names())
    assert {spec.stage for spec in CHECKS.values()} == set(stage_names())


def test_gate_files_and_their_schema_name_the_declared_stages() -> None:
    assert gate_file_schema()["properties"]["stage"]["enum"] == list(stage_names())
    with pytest.raises(ValueError, match="expected one of"):
        GateFile.model_validate(
            {"schema_version": 1, "id": "x", "check": "smoke", "stage": "contxt"}
        )


def test_a_stage_is_declared_once() -> None:
    with pytest.raises(ValueError, match="stage 'context': expected a new stage name"):
        register_stage(StageSpec("context", lambda: StageParts(run=print)))


def test_each_stage_package_exports_the_spec_the_registry_holds() -> None:
    """The registry's specs are the objects the stage packages export, holding objects."""
    import importlib

    from qualify.registry import specs

    for name, spec in specs().items():
        assert importlib.import_module(f"qualify.{name}").SPEC is spec
        assert callable(spec.loaded.run) and spec.loaded.record is not None
        assert spec.partial is not None and spec.partial.is_file()
