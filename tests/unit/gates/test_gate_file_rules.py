"""Gate files: the folder a file sits in must be its stage, every problem is reported by one
stage only (once), and each problem names the line and column to fix."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from qualify.gates.files import default_gates_dir, load_all_gates, load_gates
from qualify.registry import stage_names

SHIPPED = default_gates_dir()


def project_copy(tmp: Path) -> Path:
    """The project's gate files (and the files they name), in a folder a test may break."""
    dst = tmp / "gates"
    shutil.copytree(SHIPPED, dst)
    return dst


def test_a_gate_file_in_another_stages_folder_is_refused(tmp_path: Path) -> None:
    gates = project_copy(tmp_path)
    moved = gates / "context" / "paired.yaml"
    shutil.move(gates / "ab" / "paired.yaml", moved)
    ab, ab_problems = load_gates(gates, "ab")
    assert "paired" not in {g.gate.id for g in ab}  # it does not load as an A/B gate
    assert ab_problems == []  # nor is it one of the A/B stage's problems
    context, problems = load_gates(gates, "context")
    assert "paired" not in {g.gate.id for g in context}
    assert len(problems) == 1, problems
    line = problems[0]
    assert line.startswith(f"{moved}: stage: expected 'context', the stage of the folder")
    assert "(got 'ab')" in line and "(line 4, column 1)" in line, line


def test_the_same_file_in_its_own_folder_loads(tmp_path: Path) -> None:
    gates = project_copy(tmp_path)
    ab, problems = load_gates(gates, "ab")
    assert problems == [] and "paired" in {g.gate.id for g in ab}


def test_each_problem_is_reported_by_one_stage(tmp_path: Path) -> None:
    """Every stage's loader walks the folder; a broken file is the problem of its stage only."""
    gates = project_copy(tmp_path)
    bad = gates / "context" / "needles.yaml"
    bad.write_text(bad.read_text().replace("schema_version: 1", "schema_version: 2"))
    seen = {s: load_gates(gates, s)[1] for s in stage_names()}
    assert seen["context"] == [
        f"{bad}: schema_version: Input should be 1 (got 2) (line 1, column 1)"
    ], seen["context"]
    assert all(problems == [] for s, problems in seen.items() if s != "context"), seen
    _, every = load_all_gates(gates)
    assert every == seen["context"]


def test_an_unregistered_stage_is_named(tmp_path: Path) -> None:
    (tmp_path / "x.yaml").write_text("schema_version: 1\nid: x\ncheck: smoke\nstage: contxt\n")
    _, problems = load_all_gates(tmp_path)
    assert len(problems) == 1, problems
    assert "stage: expected one of ['identity', 'preflight'" in problems[0]
    assert "(got 'contxt') (line 4, column 1)" in problems[0]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "schema_version: 1\nid: s\ncheck: smoke\nstage: preflight\nparams:\n"
            "  prompt: hi\n  max_tokens: -3\n",
            "params.max_tokens: Input should be greater than 0 (got -3) (line 7, column 3)",
        ),
        (
            "schema_version: 1\nid: s\ncheck: smoke\nstage: preflight\nparams:\n"
            "  prompt: hi\n  promt: x\n",
            "params.promt: Extra inputs are not permitted (got 'x') (line 7, column 3)",
        ),
        (
            "schema_version: 1\nid: s\ncheck: smoke\nstage: preflight\nparams: {}\n",
            "params.prompt: Field required (line 5, column 1)",
        ),
        (
            "schema_version: 1\nid: s\ncheck: smok\nstage: preflight\n",
            "(got 'smok') (line 3, column 1)",
        ),
        (
            "id: [unclosed\n",
            "expected YAML (got expected ',' or ']', but got '<stream end>') (line 2",
        ),
    ],
    ids=["params-value", "params-extra", "params-missing", "check", "yaml"],
)
def test_problems_keep_line_and_column(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "preflight" / "bad.yaml"
    path.parent.mkdir()
    path.write_text(text)
    _, problems = load_gates(tmp_path, "preflight")
    assert len(problems) == 1 and problems[0].startswith(f"{path}: "), problems
    assert expected in problems[0], problems
