"""Gate files: every shipped file loads and matches the exported schema; bad ones are named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from jsonschema import Draft202012Validator

from qualify.gates.export import render
from qualify.gates.files import load_all_gates, load_gates
from qualify.gates.registry import CHECKS, load_checks
from qualify.preflight.stage import DEFAULT_GATES

SCHEMA_FILE = DEFAULT_GATES / "schemas" / "gate-file.schema.json"
GOOD = """\
schema_version: 1
id: smoke-x
check: smoke
stage: preflight
params:
  prompt: Hello?
"""


def test_every_shipped_gate_loads() -> None:
    """The gates directory loads without a problem, with one gate per issue item."""
    gates, problems = load_gates(DEFAULT_GATES)
    assert problems == []
    ids = {g.gate.id for g in gates}
    assert {"smoke", "json", "typed-tools", "streaming-tools", "tool-result", "responses"} <= ids
    assert {"truncation", "over-length", "soft-empty", "garble"} <= ids


def test_every_check_has_a_gate_and_a_docstring() -> None:
    """No registered check is left without a gate file or a one-line description."""
    load_checks()
    gates, problems = load_all_gates(DEFAULT_GATES)
    assert problems == []
    assert {g.gate.check for g in gates} == set(CHECKS)
    assert all(spec.doc for spec in CHECKS.values())


def test_exported_schema_is_current() -> None:
    """The committed JSON Schema equals the one the models produce (regenerate on change)."""
    assert SCHEMA_FILE.read_text() == render(), "run python -m qualify.gates.export " + str(
        SCHEMA_FILE
    )


def test_shipped_gates_validate_against_the_schema() -> None:
    """Every gate file is valid under the exported schema, including its check's params."""
    validator = Draft202012Validator(json.loads(SCHEMA_FILE.read_text()))
    for path in sorted((DEFAULT_GATES / "preflight").glob("*.yaml")):
        errors = list(validator.iter_errors(yaml.safe_load(path.read_text())))
        assert not errors, (path, [e.message for e in errors])


def test_schema_rejects_bad_params() -> None:
    """The schema catches a params error an editor should flag: a tool_choice not allowed."""
    validator = Draft202012Validator(json.loads(SCHEMA_FILE.read_text()))
    doc = yaml.safe_load((DEFAULT_GATES / "preflight" / "typed-tools.yaml").read_text())
    doc["params"]["tool_choice"] = "named"
    assert any("named" in e.message for e in validator.iter_errors(doc))


def write(tmp: Path, name: str, text: str) -> Path:
    (tmp / "schemas").mkdir(exist_ok=True)
    path = tmp / name
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (GOOD.replace("check: smoke", "check: smok"), "check: expected one of ["),
        (
            GOOD.replace("prompt: Hello?", "prompt: Hello?\n  promt: x"),
            "params.promt: Extra inputs are not permitted (got 'x')",
        ),
        (
            GOOD.replace("schema_version: 1", "schema_version: 2"),
            "schema_version: Input should be 1 (got 2)",
        ),
        (GOOD + "attempts: 0\n", "attempts: Input should be greater than or equal to 1 (got 0)"),
        (GOOD.replace("id: smoke-x", "id: Smoke X"), "id: String should match pattern"),
        ("id: [unclosed\n", "expected YAML"),
    ],
    ids=["unknown-check", "extra-param", "version", "attempts", "id", "yaml"],
)
def test_bad_gate_file_one_line_each(tmp_path: Path, text: str, expected: str) -> None:
    """Each problem is one line: the file, the field path, what was expected, what was found."""
    path = write(tmp_path, "bad.yaml", text)
    gates, problems = load_gates(tmp_path)
    assert gates == []
    assert len(problems) == 1
    assert problems[0].startswith(f"{path}: ") and expected in problems[0], problems


def test_missing_schema_file_and_duplicate_id(tmp_path: Path) -> None:
    """A params file that does not exist, and a duplicated id, are each named."""
    json_gate = (
        "schema_version: 1\nid: j\ncheck: json_schema\nstage: preflight\n"
        "params: {prompt: x, schema_file: schemas/nope.json}\n"
    )
    write(tmp_path, "a.yaml", json_gate)
    write(tmp_path, "b.yaml", GOOD)
    write(tmp_path, "c.yaml", GOOD)
    _, problems = load_gates(tmp_path)
    assert any("schemas/nope.json" in p and "does not exist" in p for p in problems)
    assert any("expected a unique id (got 'smoke-x'" in p for p in problems)


def test_tool_result_expect_must_be_only_in_result(tmp_path: Path) -> None:
    """A tool-result gate whose expected value is also in the prompt is rejected."""
    (tmp_path / "schemas").mkdir()
    (tmp_path / "schemas" / "t.json").write_text("[]")
    write(
        tmp_path,
        "t.yaml",
        "schema_version: 1\nid: t\ncheck: tool_result\nstage: preflight\nparams:\n"
        "  tools: schemas/t.json\n  prompt: Is it 13.4?\n  call: {name: f, arguments: {}}\n"
        "  result: '13.4'\n  expect: ['13.4']\n",
    )
    _, problems = load_gates(tmp_path)
    assert len(problems) == 1 and "is in the prompt, not only the result" in problems[0]
