"""The decision reads the run once: each stage's result.json read once, checked against its
attempt's manifest, its data read into the stage's typed record."""

from __future__ import annotations

import json
from pathlib import Path

import decision_contract_run as contract_run

from qualify.decision.conclude import setup
from qualify.decision.render import preview
from qualify.present.reading import run_view
from qualify.records import StageRecord
from qualify.registry import record_model


def test_each_stage_is_read_once_hash_checked_and_typed(tmp_path: Path) -> None:
    run = contract_run.build(tmp_path)
    record = preview(run, setup(None))
    view = run_view(run, record)
    assert view.problems == []
    assert set(view.stages) == {"identity", "preflight", "quality", "context", "ab", "vram"}
    vram = view.stages["vram"]
    model = record_model("vram")
    assert model is not None and isinstance(vram.record, model)
    assert vram.record.model_dump(mode="json")["hardware"]["driver_version"] == "580.159.04"
    assert vram.dir == run.path / "vram" / "attempt-001"


def test_a_result_changed_after_sealing_is_left_out_and_named(tmp_path: Path) -> None:
    run = contract_run.build(tmp_path)
    record = preview(run, setup(None))
    f = run.path / "ab" / "attempt-001" / "result.json"
    doc = json.loads(f.read_text())
    doc["data"]["metrics"][0]["candidate"] = 999.0
    f.write_text(json.dumps(doc))
    view = run_view(run, record)
    assert "ab" not in view.stages
    assert view.problems == ["ab/attempt-001/result.json: differs from its manifest"]


def section(record: StageRecord | None, gates: list[object]) -> dict[str, object]:
    """The toy stage's section (this module is its `StageSpec.section`)."""
    return {"toy": {"record": record, "gates": len(gates)}}


def plots(run: object, record: StageRecord | None, here: object) -> list[object]:
    """The toy stage's plots: what it was handed, to see it."""
    return [record]


def test_the_document_hands_each_section_its_typed_record() -> None:
    """A stage declared with the registry line alone presents itself: its section module's
    `section` and `plots` are handed the stage's typed record (None when the stage has none),
    and every built-in stage has a section module."""
    from qualify.decision import document
    from qualify.evidence.store import RunDir
    from qualify.present import plots as decision_plots
    from qualify.registry import (
        StageSpec,
        register_stage,
        section_module,
        stage_names,
        unregister_stage,
    )

    assert all(section_module(n) is not None for n in stage_names())
    register_stage(StageSpec("toy", default=False, section=__name__))
    typed = StageRecord()
    try:
        got = document.stage_sections({"toy": typed}, [])
        none = document.stage_sections({}, [])
        planned = decision_plots.plan(RunDir(Path("/nonexistent/x/y")), {"toy": typed})
    finally:
        unregister_stage("toy")
    assert got["toy"] == {"record": typed, "gates": 0} and typed in planned
    assert none["toy"] == {"record": None, "gates": 0}
    assert {"identity", "functional", "quality", "context", "capacity", "load"} <= set(got)
    assert {"ab", "ab_lanes", "ab_gates", "vram"} <= set(got)
    assert isinstance(got["identity"], list) and isinstance(got["vram"], dict)


def test_the_identity_table_names_every_pin() -> None:
    """Every pin the candidate declares has a row label (the section reads them by name)."""
    from qualify.candidate import Identity
    from qualify.identity.section import PIN_LABELS

    assert list(PIN_LABELS) == list(Identity.model_fields)
