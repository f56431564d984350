"""The build steps pyproject.toml cannot say: the files a run reads beside the code (gate files,
decision templates, the example house policy) live at the top of the repository, where people
edit them, and ship inside the package as `qualify/_assets/`; the commit the package was built
from is written into it as `qualify/_build.json`. An sdist carries the commit in
`qualify-build.json`, so a wheel built from it (no git there) names the same commit."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

ROOT = Path(__file__).resolve().parent
SHIPPED = ("gates", "templates", "examples/house", "traces")
BUILD_FILE = "qualify-build.json"


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", *args], cwd=ROOT, capture_output=True, text=True, check=True, timeout=30
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip()


def build_info() -> dict[str, object]:
    """The commit of this source tree and whether it had uncommitted changes; from the sdist's
    record where there is no git (a wheel built from an sdist)."""
    kept = ROOT / BUILD_FILE
    if kept.is_file():
        return dict(json.loads(kept.read_text()))
    if (ROOT / ".git").exists():
        commit = _git("rev-parse", "HEAD")
        status = _git("status", "--porcelain", "--untracked-files=no")
        if commit:
            return {"commit": commit, "dirty": bool(status)}
    return {"commit": None, "dirty": None}


class BuildPy(build_py):
    def run(self) -> None:
        super().run()
        if self.editable_mode:  # an editable install reads the checkout itself
            return
        target = Path(self.build_lib) / "qualify" / "_assets"
        shutil.rmtree(target, ignore_errors=True)
        for name in SHIPPED:
            shutil.copytree(ROOT / name, target / name, ignore=shutil.ignore_patterns("__pycache__"))
        info = {"version": self.distribution.get_version(), **build_info()}
        (Path(self.build_lib) / "qualify" / "_build.json").write_text(json.dumps(info) + "\n")


class Sdist(sdist):
    def make_release_tree(self, base_dir: str, files: list[str]) -> None:
        super().make_release_tree(base_dir, files)
        (Path(base_dir) / BUILD_FILE).write_text(json.dumps(build_info()) + "\n")


setup(cmdclass={"build_py": BuildPy, "sdist": Sdist})
