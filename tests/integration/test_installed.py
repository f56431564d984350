"""The installed tool, not a checkout: the sdist and wheel built from this tree, the wheel alone
installed into a fresh venv (its dependencies at the lock file's versions), and every command run
from a directory outside the checkout, where no `gates/`, `templates/` or `examples/` is near.
The real run of the local server through the installed entry point is tests/integration/
test_init.py (`init --attach`, `validate`, `run`, `verify`, `render`, all installed).

The fresh venv has no qualify source on its path: `import qualify` resolves to site-packages,
which the first test checks, so a file the wheel forgot fails here and not in a user's CI.
"""

from __future__ import annotations

import json
import shutil
import sys
import tarfile
from pathlib import Path

import pytest
from conftest import outside_env
from conftest import sh as _sh

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "smollm2"


@pytest.fixture
def outside(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A directory far from the checkout holding copies of the demo candidate and control, and
    a user's environment."""
    work = tmp_path / "elsewhere"
    work.mkdir()
    for name in ("candidate.toml", "control.toml"):
        shutil.copy(EXAMPLE / name, work / name)
    return work, outside_env(tmp_path)


def test_the_wheel_carries_what_a_run_reads_and_names_its_commit(
    installed: Path, outside: tuple[Path, dict[str, str]]
) -> None:
    work, env = outside
    python = installed.parent / "python"
    probe = (
        "import json, qualify, qualify.assets as a; print(json.dumps({'file': qualify.__file__, "
        "'gates': str(a.gates_dir()), 'templates': str(a.templates_dir()), "
        "'house': str(a.example_house_policy()), 'build': a.build_info().model_dump()}))"
    )
    seen = json.loads(_sh(python, "-c", probe, cwd=work, env=env))
    site = str(installed.parent.parent)
    assert seen["file"].startswith(site), seen
    for key in ("gates", "templates", "house"):
        assert seen[key].startswith(site) and Path(seen[key]).exists(), (key, seen)
    head = _sh("git", "rev-parse", "HEAD", cwd=ROOT).strip()
    assert seen["build"]["installed"] == "wheel" and seen["build"]["commit"] == head, seen
    shipped = sorted(p.relative_to(seen["gates"]) for p in Path(seen["gates"]).rglob("*.*"))
    assert shipped == sorted(p.relative_to(ROOT / "gates") for p in (ROOT / "gates").rglob("*.*"))


def test_validate_and_plan_from_outside_the_checkout(
    installed: Path, outside: tuple[Path, dict[str, str]]
) -> None:
    work, env = outside
    _sh(installed, "validate", "candidate.toml", cwd=work, env=env)
    plan = _sh(installed, "run", "--plan", "candidate.toml", cwd=work, env=env)
    assert "preflight" in plan and "capacity" in plan
    (work / "candidate.toml").write_text(
        (work / "candidate.toml").read_text().replace("run = [", 'run = ["nope", ')
    )
    _sh(installed, "validate", "candidate.toml", cwd=work, env=env, ok=2)


def test_published_runs_verify_and_diff_with_the_installed_tool(
    installed: Path, outside: tuple[Path, dict[str, str]]
) -> None:
    """The published H200 runs verify with the installed tool, and its `diff` of them is the
    checkout's, byte for byte."""
    work, env = outside
    with tarfile.open(ROOT / "docs/gpu/evidence.tgz") as tf:
        tf.extractall(work / "published", filter="data")
    runs = {
        p.parent.name.rsplit("-", 1)[-1]: p
        for p in (work / "published" / "evidence").glob("*/*")
        if (p / "run.json").is_file()
    }
    assert set(runs) == {"roomy", "tight"}, runs
    key = ROOT / "docs/gpu/gpu.pub"
    for run in runs.values():
        envelope = run / "decision/attempt-001.dsse.json"
        _sh(installed, "verify", envelope, "--key", key, cwd=work, env=env)
    args = ("diff", runs["tight"], runs["roomy"], "--key", key, "--format", "json")
    report = _sh(installed, *args, cwd=work, env=env, ok=1)
    here = _sh(sys.executable, "-m", "qualify", *args, cwd=ROOT, ok=1)
    assert json.loads(report) == json.loads(here) and json.loads(report)["regressed"]
