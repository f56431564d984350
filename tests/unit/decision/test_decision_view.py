"""The decision reads the run once: each stage's result.json read once, checked against its
attempt's manifest, its data read into the stage's typed record."""

from __future__ import annotations

import json
from pathlib import Path

import decision_contract_run as contract_run

from qualify.decision.conclude import setup
from qualify.decision.reading import run_view
from qualify.decision.render import preview
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
