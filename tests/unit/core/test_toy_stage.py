"""Adding a stage: the toy stage of docs/contributing.md, built from the document's own blocks,
declared by the registry line alone, run, judged (its gate passes and fails), required by the
default house, decided (promote, and no-promote when its gate fails), rendered, diffed and
verified."""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import git
import pytest

import qualify
from qualify import registry
from qualify.candidate import Stages, load_candidate
from qualify.decision.conclude import conclude, setup, sign_decision
from qualify.decision.verify import VerifyReport, verify
from qualify.diff.figures import compare_figures
from qualify.evidence.signing import generate, load_private, load_public
from qualify.evidence.store import RunDir
from qualify.gates import registry as checks
from qualify.gates.files import gate_file_schema, load_all_gates, load_gates
from qualify.present.record import DecisionRecord
from qualify.progress import Progress
from qualify.records import StageResult, Verdict
from qualify.registry import parse_record, stage_names
from qualify.serving.lanes import Lanes
from qualify.stage import STAGES, StageContext, load_all
from qualify.trust.house import PolicyRules, default_text
from qualify.trust.repository import init, pin

ROOT = Path(__file__).resolve().parents[3]
GUIDE = ROOT / "docs" / "contributing.md"
EXAMPLE = ROOT / "examples" / "smollm2" / "candidate.toml"
BLOCK = re.compile(
    r"^```(?:python|yaml)\n# (\S+)\n(.*?)^```$|^```jinja\n(\{#- (\S+) -#\}\n.*?)^```$",
    re.MULTILINE | re.DOTALL,
)
REGISTRY_LINE = '    "qualify.toy:SPEC",'
FILES = {"__init__.py", "record.py", "judges.py", "stage.py", "section.py", "section.md.j2"}


def blocks() -> dict[str, str]:
    """The files the guide shows, `{path: text}`, from blocks whose first line names a path."""
    found = {}
    for path, text, jinja, jinja_path in BLOCK.findall(GUIDE.read_text()):
        found[path or jinja_path] = text or jinja
    assert set(found) == {*(f"qualify/toy/{m}" for m in FILES), "gates/toy/levels.yaml"}
    return found


@pytest.fixture
def toy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The toy package written under `tmp_path/qualify/toy` (found as `qualify.toy`), its gate
    file under `tmp_path/gates/toy`, the guide's registry line added to `STAGES` before vram's;
    everything it registered is removed afterwards."""
    for path, text in blocks().items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    monkeypatch.setattr(qualify, "__path__", [*qualify.__path__, str(tmp_path / "qualify")])
    assert "```python\n" + REGISTRY_LINE + "\n```" in GUIDE.read_text()
    at = registry.STAGES.index("qualify.vram:SPEC")
    lines = [*registry.STAGES[:at], REGISTRY_LINE.strip(' ",'), *registry.STAGES[at:]]
    monkeypatch.setattr(registry, "STAGES", lines)
    registry.reload()
    try:
        yield tmp_path / "gates"
    finally:
        registry.reload()
        STAGES.pop("toy", None)
        for name in [n for n, spec in checks.CHECKS.items() if spec.stage == "toy"]:
            del checks.CHECKS[name]
        for mod in [m for m in sys.modules if m == "qualify.toy" or m.startswith("qualify.toy.")]:
            del sys.modules[mod]


def new_run(tmp: Path) -> RunDir:
    """A run of the example candidate that plans the toy stage alone."""
    run = RunDir(tmp / "ev" / "smollm2-135m-ngram" / "20260101T000000Z-000001")
    run.path.mkdir(parents=True)
    info = {
        "run_id": run.run_id,
        "candidate": "smollm2-135m-ngram",
        "candidate_path": str(EXAMPLE),
        "candidate_sha256": hashlib.sha256(EXAMPLE.read_bytes()).hexdigest(),
        "stages": ["toy"],
    }
    (run.path / "run.json").write_text(json.dumps(info))
    return run


def run_toy(run: RunDir, gates_dir: Path) -> StageResult:
    """The toy stage run as `qualify run` runs it: its result written and its attempt sealed."""
    loaded = load_candidate(EXAMPLE)
    lanes = Lanes(run, {"candidate": loaded})
    attempt = run.new_attempt("toy")
    ctx = StageContext(
        "toy", loaded, run, attempt, lanes, Progress(quiet=True), gates_dir=gates_dir
    )
    result = asyncio.run(STAGES["toy"](ctx))
    attempt.write_result(result)
    attempt.seal()
    return result


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
    assert "toy/*" in PolicyRules().required  # the default house requires it
    assert '"toy/*"' in default_text().partition("required = ")[2].partition("\n")[0]


def test_the_toy_stage_runs_and_its_gate_passes(toy: Path, tmp_path: Path) -> None:
    load_all()
    result = run_toy(new_run(tmp_path), toy)
    assert result.stage == "toy" and result.verdict is Verdict.PASS, result.reasons
    assert [(g.key, g.verdict) for g in result.gates] == [("toy/levels", Verdict.PASS)]
    assert result.data == {"record_version": 1, "levels": ["off", "think"]}  # the record
    record = parse_record("toy", result.data)  # read back by the class its spec holds
    assert record is not None and type(record).__module__ == "qualify.toy.record"


def test_the_toy_gate_fails_on_failing_data(toy: Path, tmp_path: Path) -> None:
    gate = toy / "toy" / "levels.yaml"
    gate.write_text(gate.read_text().replace("min_levels: 2", "min_levels: 3"))
    load_all()
    result = run_toy(new_run(tmp_path), toy)
    assert result.verdict is Verdict.FAIL
    assert result.reasons == ["toy/levels: 2 reasoning levels, expected at least 3"]


def test_a_toy_gate_file_outside_its_folder_is_refused(toy: Path) -> None:
    moved = toy / "context" / "levels.yaml"
    moved.parent.mkdir()
    (toy / "toy" / "levels.yaml").rename(moved)
    _, problems = load_gates(toy, "context")
    assert len(problems) == 1 and "stage: expected 'context'" in problems[0], problems
    assert load_gates(toy, "toy") == ([], [])


def decided(tmp: Path, gates_dir: Path) -> tuple[RunDir, DecisionRecord, VerifyReport]:
    """A toy run decided under a house that requires the toy's gates, signed and verified."""
    house = tmp / "house"
    init(house)
    (house / "house-policy.toml").write_text('version = 1\nrequired = ["toy/*"]\n')
    repo = git.Repo(house)
    repo.git.add("house-policy.toml")
    repo.git.commit("-m", "house: policy")
    priv, pub = generate(tmp / "keys" / "ci")
    pin(house, "decision", pub, "ci", "the CI runner signs decisions")
    load_all()
    run = new_run(tmp)
    run_toy(run, gates_dir)
    inv = run.new_attempt("run")
    inv.write_bytes("candidate.toml", EXAMPLE.read_bytes())
    inv.write_json("invocation.json", {"argv": ["qualify", "run"], "at": "2026-01-01T00:00:00Z"})
    key = load_private(priv)
    record = conclude(run, setup(house), key, record_attempt=f"run/{inv.path.name}")
    inv.write_json("outcome.json", {"exit_code": 0 if record.promote else 1})
    inv.seal()
    return run, record, verify(sign_decision(run, record, key), load_public(pub))


def test_a_toy_run_promotes_renders_and_verifies(toy: Path, tmp_path: Path) -> None:
    run, record, report = decided(tmp_path, toy)
    assert record.decision == "promote", record.evaluation.reasons
    md = (run.path / "decision" / "attempt-001" / "decision.md").read_text()
    assert "## Toy\n\nReasoning levels declared: off, think.\n" in md  # its partial
    assert "- toy: 2 reasoning levels\n" in md  # its headline figure
    assert report.ok, report.problems
    why = "it sends nothing and keeps no exchange: its record is the signed candidate's"
    assert f"toy: not judged again from its kept exchanges: {why}" in report.notes


def test_a_toy_run_whose_gate_fails_is_no_promote(toy: Path, tmp_path: Path) -> None:
    gate = toy / "toy" / "levels.yaml"
    gate.write_text(gate.read_text().replace("min_levels: 2", "min_levels: 3"))
    _, record, report = decided(tmp_path, toy)
    assert record.decision == "no-promote"
    assert [g.key for g in record.evaluation.gates if g.status == "blocks"] == ["toy/levels"]
    assert report.ok, report.problems


def test_two_toy_records_are_diffed_by_its_cells(toy: Path) -> None:
    a = parse_record("toy", {"record_version": 1, "levels": ["off", "think"]})
    b = parse_record("toy", {"record_version": 1, "levels": ["off"]})
    assert a is not None and b is not None
    (entry,) = compare_figures({"toy": a}, {"toy": b}, 3.0, [])
    assert (entry["group"], entry["cell"], entry["comparable"]) == ("toy", "levels", True)
    assert entry["measures"]["levels"]["a"] == 2.0


def test_without_the_registry_line_there_is_no_toy_stage() -> None:
    assert "toy" not in stage_names()
    assert "toy/*" not in PolicyRules().required
