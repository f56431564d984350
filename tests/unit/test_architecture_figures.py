"""The figures of `scripts/architecture_figures.py`, on a tiny package written for each test:
every figure is asserted, so a figure computed wrong fails here."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]

LONG = "def long() -> int:\n" + "".join(f"    x{i} = {i}\n" for i in range(68)) + "    return 0\n"

PACKAGE = {
    "__init__.py": '"""A package."""\n',
    # the run: pipeline.execute walks to decision.statement.sign_attempt
    "pipeline.py": """\
from qualify import records
from qualify.decision.statement import sign_attempt


def helper() -> int:
    return 1


class Runner:
    def __init__(self) -> None:
        self.n = 0

    def run(self) -> None:
        self.step()

    def step(self) -> None:
        self.n += 1


def execute() -> None:
    helper()
    runner = Runner()
    runner.run()
    records.load()
    sign_attempt()
""",
    # layer 0 importing layer 5 (relative, in a function: runtime all the same)
    "records.py": """\
def load() -> None:
    from .decision import statement

    statement.parse()


def dump() -> None:
    pass
""",
    "decision/__init__.py": "",
    "decision/statement.py": """\
import json
from typing import TYPE_CHECKING

from qualify import records

if TYPE_CHECKING:
    from qualify.pipeline import Runner

RESULT = "result.json"


def parse() -> None:
    records.dump()
    parse_result()


def parse_result() -> None:
    json.loads((records.here / RESULT).read_text())


def sign_attempt() -> None:
    pass


def unreached(d: Runner) -> None:
    path = d / "result.json"
    Result.model_validate_json(path.read_text())
""",
    "extra.py": "from typing import Any\n\n\ndef f(x: Any) -> dict[str, Any]:\n    return {}\n\n\n"
    + LONG,
}


def script() -> ModuleType:
    path = ROOT / "scripts" / "architecture_figures.py"
    spec = importlib.util.spec_from_file_location("architecture_figures", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["architecture_figures"] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def src(tmp_path: Path) -> Path:
    for rel, text in PACKAGE.items():
        path = tmp_path / "qualify" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path / "qualify"


def test_modules_and_lines(src: Path) -> None:
    f = script().figures(src)
    assert f["modules"] == 6
    assert f["lines"] == sum(text.count("\n") for text in PACKAGE.values())
    assert f["modules_over_300"] == []


def test_functions_over_40_60_80(src: Path) -> None:
    f = script().figures(src)
    assert f["functions_over"] == {40: 1, 60: 1, 80: 0}
    assert f["functions_over_60"] == {"qualify/extra.py::long": 70}
    assert f["functions"] == 13


def test_a_line_with_dict_str_any_and_a_bare_any_counts_once(src: Path) -> None:
    f = script().figures(src)
    assert (f["any_lines"], f["dict_str_any_lines"], f["bare_any_lines"]) == (1, 1, 1)


def test_two_packages_importing_each_other_are_one_cycle(src: Path) -> None:
    f = script().figures(src)
    # statement -> pipeline is type-checking-only: pipeline stays out of the cycle
    assert f["runtime_cycles"] == [["decision", "records"]]
    assert f["packages"] == ["decision", "extra", "pipeline", "qualify", "records"]


def test_imports_up_the_layers(src: Path) -> None:
    f = script().figures(src)
    assert f["up_runtime"] == ["qualify.records -> qualify.decision.statement"]
    assert f["up_type_checking"] == ["qualify.decision.statement -> qualify.pipeline"]
    assert f["unmapped"] == ["extra"]
    assert "pipeline" not in f["absent"] and "errors" in f["absent"]


def test_run_walk(src: Path) -> None:
    w = script().figures(src)["walk"]
    assert w["order"] == [
        "qualify.pipeline.execute",
        "qualify.pipeline.helper",
        "qualify.pipeline.Runner.__init__",
        "qualify.pipeline.Runner.run",
        "qualify.pipeline.Runner.step",
        "qualify.records.load",
        "qualify.decision.statement.parse",
        "qualify.records.dump",
        "qualify.decision.statement.parse_result",
        "qualify.decision.statement.sign_attempt",
    ]
    assert w["reached"]
    assert (w["functions"], w["files"], w["stays"], w["returns"]) == (10, 3, 5, 2)
    assert w["result_parses_reached"] == ["qualify/decision/statement.py:18"]
    assert w["result_parses_total"] == 2


def test_main_prints_markdown_and_json(src: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sf = script()
    assert sf.main([str(src)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("| figure | value |\n| --- | --- |\n")
    assert "| functions over 40 / 60 / 80 lines | 1 / 1 / 0 |" in out
    assert "{decision, records}" in out
    assert sf.main([str(src), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["walk"]["returns"] == 2
