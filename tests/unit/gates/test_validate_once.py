"""`qualify validate` over the project's own gate files: a broken file is named once, with its
line and column, however many stages' loaders walk the folder."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def project_copy(tmp: Path) -> Path:
    """The package, its gate files and the demo candidate, in a folder a test may break (the
    project's `gates/` is found next to the package)."""
    skip = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(ROOT / "qualify", tmp / "qualify", ignore=skip)
    shutil.copytree(ROOT / "gates", tmp / "gates", ignore=skip)
    shutil.copytree(ROOT / "examples" / "smollm2", tmp / "examples" / "smollm2")
    return tmp


def validate(root: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run(
        [sys.executable, "-m", "qualify", "validate", "examples/smollm2/candidate.toml"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


def test_a_broken_project_gate_file_is_named_once(tmp_path: Path) -> None:
    root = project_copy(tmp_path)
    bad = root / "gates" / "context" / "needles.yaml"
    bad.write_text(bad.read_text().replace("schema_version: 1", "schema_version: 2"))
    done = validate(root)
    assert done.returncode == 2, (done.stdout, done.stderr)
    named = [ln for ln in done.stderr.splitlines() if str(bad) in ln]
    assert named == [f"  {bad}: schema_version: Input should be 1 (got 2) (line 1, column 1)"], (
        done.stderr
    )
    assert "Traceback" not in done.stderr


def test_a_gate_file_in_the_wrong_folder_fails_validation(tmp_path: Path) -> None:
    root = project_copy(tmp_path)
    moved = root / "gates" / "context" / "paired.yaml"
    shutil.move(root / "gates" / "ab" / "paired.yaml", moved)
    done = validate(root)
    assert done.returncode == 2, (done.stdout, done.stderr)
    named = [ln for ln in done.stderr.splitlines() if str(moved) in ln]
    assert len(named) == 1, done.stderr
    assert "stage: expected 'context', the stage of the folder it sits in (got 'ab')" in named[0]
