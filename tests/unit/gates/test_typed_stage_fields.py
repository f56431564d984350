"""`mypy --strict` catches a misspelt stage field on the candidate, reached from a stage's
context (`ctx.candidate`) or from the candidate itself: snippets type-checked with the project's
own mypy configuration."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SNIPPET = """\
from qualify.candidate import Candidate
from qualify.stage import StageContext


def from_context(ctx: StageContext) -> object:
    return ctx.candidate.stages.{field}.level


def from_candidate(c: Candidate) -> object:
    return c.stages.{field}.level
"""


@pytest.mark.slow
def test_a_misspelt_stage_field_fails_strict_type_checking(tmp_path: Path) -> None:
    (tmp_path / "misspelt.py").write_text(SNIPPET.format(field="contxt"))
    (tmp_path / "spelt.py").write_text(SNIPPET.format(field="context"))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--config-file",
            str(ROOT / "pyproject.toml"),
            "--strict",
            "--follow-imports=silent",  # errors of the package itself are `make check`'s
            "--cache-dir",
            str(ROOT / ".mypy_cache" / "typed-snippets"),
            str(tmp_path / "misspelt.py"),
            str(tmp_path / "spelt.py"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    errors = re.findall(r"^(\S+?):(\d+): error: (.*)$", done.stdout, re.MULTILINE)
    found = [(Path(f).name, int(line), msg) for f, line, msg in errors]
    expected = '"Stages" has no attribute "contxt"; maybe "context"?  [attr-defined]'
    assert found == [("misspelt.py", 6, expected), ("misspelt.py", 10, expected)], done.stdout
