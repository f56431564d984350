"""Adding a stage: the toy stage of docs/contributing.md, built from the document's own blocks,
declared by the registry line alone, run, and judged (its gate passes and fails)."""

from __future__ import annotations

import asyncio
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import qualify
from qualify.candidate import Stages, load_candidate
from qualify.evidence.store import EvidenceStore
from qualify.gates import registry as checks
from qualify.gates.files import gate_file_schema, load_all_gates, load_gates
from qualify.progress import Progress
from qualify.records import StageResult, Verdict
from qualify.registry import (
    StageSpec,
    parse_record,
    register_stage,
    stage_names,
    unregister_stage,
)
from qualify.serving.lanes import Lanes
from qualify.stage import STAGES, StageContext, load_all

ROOT = Path(__file__).resolve().parents[3]
GUIDE = ROOT / "docs" / "contributing.md"
BLOCK = re.compile(r"^```(?:python|yaml)\n# (\S+)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
REGISTRY_LINE = 'register_stage(StageSpec("toy"))'


def blocks() -> dict[str, str]:
    """The files the guide shows, `{path: text}`, from blocks whose first line names a path."""
    found = {path: text for path, text in BLOCK.findall(GUIDE.read_text())}
    toy = {"record.py", "judges.py", "stage.py"}
    assert set(found) == {*(f"qualify/toy/{m}" for m in toy), "gates/toy/levels.yaml"}
    return found


@pytest.fixture
def toy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The toy package written under `tmp_path/qualify/toy` (found as `qualify.toy`), its gate
    file under `tmp_path/gates/toy`; everything it registered is removed afterwards."""
    for path, text in blocks().items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    (tmp_path / "qualify" / "toy" / "__init__.py").write_text('"""The toy stage."""\n')
    monkeypatch.setattr(qualify, "__path__", [*qualify.__path__, str(tmp_path / "qualify")])
    assert REGISTRY_LINE in GUIDE.read_text()
    register_stage(StageSpec("toy"), before="vram")  # the guide's registry line
    try:
        yield tmp_path / "gates"
    finally:
        unregister_stage("toy")
        STAGES.pop("toy", None)
        for name in [n for n, spec in checks.CHECKS.items() if spec.stage == "toy"]:
            del checks.CHECKS[name]
        checks._IMPORTED.difference_update({"qualify.toy.judges", "qualify.toy.gates"})
        for mod in [m for m in sys.modules if m == "qualify.toy" or m.startswith("qualify.toy.")]:
            del sys.modules[mod]


def run_toy(tmp: Path, gates_dir: Path) -> StageResult:
    loaded = load_candidate(ROOT / "examples" / "smollm2" / "candidate.toml")
    run = EvidenceStore(tmp / "evidence").new_run(loaded.candidate.name)
    lanes = Lanes(run, {"candidate": loaded})
    ctx = StageContext(
        "toy", loaded, run, run.new_attempt("toy"), lanes, Progress(quiet=True), gates_dir=gates_dir
    )
    return asyncio.run(STAGES["toy"](ctx))


def test_the_registry_line_declares_the_stage_everywhere(toy: Path) -> None:
    assert stage_names()[-2:] == ("toy", "vram")
    load_all()
    assert "toy" in STAGES
    assert checks.load_checks()["toy-levels"].stage == "toy"
    assert "toy" in gate_file_schema()["properties"]["stage"]["enum"]
    gates, problems = load_gates(toy, "toy")
    assert problems == [] and [g.gate.id for g in gates] == ["levels"]
    assert load_all_gates(toy)[1] == []
    assert Stages(run=["identity", "toy"]).run == ["identity", "toy"]  # a candidate may name it


def test_the_toy_stage_runs_and_its_gate_passes(toy: Path, tmp_path: Path) -> None:
    load_all()
    result = run_toy(tmp_path, toy)
    assert result.stage == "toy" and result.verdict is Verdict.PASS, result.reasons
    assert [(g.key, g.verdict) for g in result.gates] == [("toy/levels", Verdict.PASS)]
    assert result.data == {"record_version": 1, "levels": ["off", "think"]}  # the record
    record = parse_record("toy", result.data)  # read back by the class the registry names
    assert record is not None and type(record).__module__ == "qualify.toy.record"


def test_the_toy_gate_fails_on_failing_data(toy: Path, tmp_path: Path) -> None:
    gate = toy / "toy" / "levels.yaml"
    gate.write_text(gate.read_text().replace("min_levels: 2", "min_levels: 3"))
    load_all()
    result = run_toy(tmp_path, toy)
    assert result.verdict is Verdict.FAIL
    assert result.reasons == ["toy/levels: 2 reasoning levels, expected at least 3"]


def test_a_toy_gate_file_outside_its_folder_is_refused(toy: Path) -> None:
    moved = toy / "context" / "levels.yaml"
    moved.parent.mkdir()
    (toy / "toy" / "levels.yaml").rename(moved)
    _, problems = load_gates(toy, "context")
    assert len(problems) == 1 and "stage: expected 'context'" in problems[0], problems
    assert load_gates(toy, "toy") == ([], [])


def test_without_the_registry_line_there_is_no_toy_stage() -> None:
    assert "toy" not in stage_names()
    with pytest.raises(ValueError, match="expected a stage declared"):
        from qualify.stage import stage

        stage("toy")
