"""The size check (`make check`): a module over 500 lines or a function over 60 fails unless it
is listed, a listed one may not grow, and the list only shrinks."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[3]


def size_check() -> ModuleType:
    spec = importlib.util.spec_from_file_location("size_check", ROOT / "scripts" / "size_check.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["size_check"] = module
    spec.loader.exec_module(module)
    return module


def function(name: str, lines: int, indent: str = "") -> str:
    """A function of exactly `lines` lines, `def` line included."""
    body = "".join(f"{indent}    x{i} = {i}\n" for i in range(lines - 2))
    return f"{indent}def {name}() -> int:\n{body}{indent}    return 0\n"


def project(tmp: Path, module_lines: int = 10, fn_lines: int = 5) -> Path:
    """A project with `qualify/big.py`: one function of `fn_lines`, padded to `module_lines`."""
    pkg = tmp / "qualify"
    pkg.mkdir(exist_ok=True)
    (pkg / "__init__.py").write_text('"""A package."""\n')
    text = '"""A module."""\n\n\n' + function("long", fn_lines)
    text += "\n" * max(0, module_lines - len(text.splitlines()))
    (pkg / "big.py").write_text(text)
    return tmp


def run(tmp: Path, exceptions: str | None) -> tuple[int, list[str]]:
    sc = size_check()
    listed = tmp / "exceptions.txt"
    if exceptions is not None:
        listed.write_text(exceptions)
    sizes = sc.measure(tmp)
    problems = sc.check(sizes, sc.read_exceptions(listed))
    code = sc.main(["--root", str(tmp), "--exceptions", str(listed)])
    return code, problems


def test_a_small_project_passes(tmp_path: Path) -> None:
    code, problems = run(project(tmp_path), None)
    assert (code, problems) == (0, [])


def test_a_module_and_a_function_over_the_limits_fail(tmp_path: Path) -> None:
    code, problems = run(project(tmp_path, module_lines=501, fn_lines=61), None)
    assert code == 1
    assert problems == [
        "qualify/big.py: 501 lines, over the 500-line limit of a module (expected it split; "
        "only what scripts/size_exceptions.txt lists may be over)",
        "qualify/big.py::long: 61 lines, over the 60-line limit of a function (expected it "
        "split; only what scripts/size_exceptions.txt lists may be over)",
    ]


def test_the_limits_themselves_pass(tmp_path: Path) -> None:
    code, problems = run(project(tmp_path, module_lines=500, fn_lines=60), None)
    assert (code, problems) == (0, [])


def test_methods_and_nested_functions_are_measured(tmp_path: Path) -> None:
    pkg = project(tmp_path) / "qualify"
    text = "class A:\n" + function("m", 61, "    ") + "\n\ndef outer() -> None:\n"
    text += function("inner", 62, "    ")
    (pkg / "nested.py").write_text(text)
    _, problems = run(tmp_path, None)
    keys = [p.split(": ", 1)[0] for p in problems]
    assert keys == [
        "qualify/nested.py::A.m",
        "qualify/nested.py::outer",
        "qualify/nested.py::outer.inner",
    ]


def test_a_listed_exception_passes_at_its_size_and_fails_when_it_grows(tmp_path: Path) -> None:
    project(tmp_path, module_lines=520, fn_lines=70)
    listed = "# today\n520 qualify/big.py\n70 qualify/big.py::long\n"
    assert run(tmp_path, listed) == (0, [])
    project(tmp_path, module_lines=521, fn_lines=71)
    code, problems = run(tmp_path, listed)
    assert code == 1
    assert problems == [
        "qualify/big.py: grew from 520 to 521 lines, over the 500-line limit of a module "
        "(the exceptions only shrink)",
        "qualify/big.py::long: grew from 70 to 71 lines, over the 60-line limit of a function "
        "(the exceptions only shrink)",
    ]


def test_the_list_only_shrinks(tmp_path: Path) -> None:
    """A listed one that got smaller, or within its limit, or gone, must be lowered or dropped;
    `--shrink` does that, and adds nothing."""
    project(tmp_path, module_lines=510, fn_lines=40)
    listed = "520 qualify/big.py\n70 qualify/big.py::long\n90 qualify/gone.py::f\n"
    code, problems = run(tmp_path, listed)
    assert code == 1
    assert problems == [
        "qualify/big.py: shrank from 520 to 510 lines: lower its entry",
        "qualify/big.py::long: 40 lines, within the 60-line limit now: drop its entry",
        "qualify/gone.py::f: listed at 90 lines but gone: drop its entry",
    ]
    sc = size_check()
    path = tmp_path / "exceptions.txt"
    assert sc.main(["--root", str(tmp_path), "--exceptions", str(path), "--shrink"]) == 0
    assert sc.read_exceptions(path) == {"qualify/big.py": 510}
    project(tmp_path, module_lines=510, fn_lines=61)  # a new violation is not added by --shrink
    assert sc.main(["--root", str(tmp_path), "--exceptions", str(path), "--shrink"]) == 1


def test_a_malformed_exceptions_line_is_named(tmp_path: Path) -> None:
    project(tmp_path)
    path = tmp_path / "exceptions.txt"
    path.write_text("qualify/big.py 520\n")
    sc = size_check()
    assert sc.main(["--root", str(tmp_path), "--exceptions", str(path)]) == 2
