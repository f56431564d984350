"""The installed tool, not a checkout: the sdist and wheel built from this tree, the wheel alone
installed into a fresh venv (its dependencies at the lock file's versions), and every command run
from a directory outside the checkout, where no `gates/`, `templates/` or `examples/` is near.

The fresh venv has no qualify source on its path: `import qualify` resolves to site-packages,
which the first test checks, so a file the wheel forgot fails here and not in a user's CI.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from conftest import write_candidate

from qualify.serving.local import LocalPaths

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "smollm2"


def _sh(*cmd: str | Path, cwd: Path, env: dict[str, str] | None = None, ok: int = 0) -> str:
    r = subprocess.run(
        [str(c) for c in cmd], cwd=cwd, capture_output=True, text=True, env=env, timeout=900
    )
    assert r.returncode == ok, f"{cmd} exited {r.returncode}:\n{r.stdout[-3000:]}\n{r.stderr}"
    return r.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`python -m build` (the sdist, then the wheel built from the sdist, as a release does),
    and a fresh venv holding that wheel; returns the venv's `qualify`."""
    base = tmp_path_factory.mktemp("installed")
    dist = base / "dist"
    _sh(sys.executable, "-m", "build", "--outdir", dist, ROOT, cwd=base)
    (wheel,) = dist.glob("qualify-*.whl")
    venv = base / "venv"
    _sh(sys.executable, "-m", "venv", venv, cwd=base)
    pip = venv / "bin" / "pip"
    _sh(pip, "install", "-q", wheel, "-c", ROOT / "requirements-dev.lock", cwd=base)
    return venv / "bin" / "qualify"


@pytest.fixture
def outside(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A directory far from the checkout holding copies of the demo candidate and control, and
    an environment with no PYTHONPATH and no QUALIFY_* settings of the checkout's."""
    work = tmp_path / "elsewhere"
    work.mkdir()
    for name in ("candidate.toml", "control.toml"):
        shutil.copy(EXAMPLE / name, work / name)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("QUALIFY_", "PYTHON"))}
    env["QUALIFY_TICKETS"] = str(tmp_path / "tickets")
    return work, env


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


def test_a_real_run_through_the_installed_entry_point(
    installed: Path, outside: tuple[Path, dict[str, str]], local_server: LocalPaths
) -> None:
    """The house set up, a key made, the real local server qualified (identity and preflight)
    and the signed decision verified, rendered and shown, all by the installed `qualify`; the
    run records the code that ran (the wheel, its commit), not the repository around the
    candidate (none here)."""
    work, env = outside
    write_candidate(work, stages=["identity", "preflight"])
    q = installed
    _sh(q, "keygen", "--out", work / "keys/ci", cwd=work, env=env)
    _sh(q, "house", "init", work / "house", "--policy", "example", cwd=work, env=env)
    pin = ("house", "pin", "decision", work / "keys/ci.pub", "--name", "ci", "--why", "CI signs")
    _sh(q, *pin, "--house", work / "house", cwd=work, env=env)
    run = ("run", "candidate.toml", "--key", work / "keys/ci.key", "--house", work / "house")
    _sh(q, *run, "--evidence", work / "evidence", cwd=work, env=env, ok=1)
    (run_dir,) = [p.parent for p in (work / "evidence").glob("*/*/run.json")]
    info = json.loads((run_dir / "run.json").read_text())
    head = _sh("git", "rev-parse", "HEAD", cwd=ROOT).strip()
    assert info["tool"]["installed"] == "wheel" and info["tool"]["commit"] == head, info["tool"]
    assert info["git"]["commit"] is None, "the candidate here is in no repository"
    envelope = run_dir / "decision/attempt-001.dsse.json"
    _sh(q, "verify", envelope, "--house", work / "house", cwd=work, env=env)
    md = (run_dir / "decision/attempt-001/decision.md").read_text()
    assert f"(wheel of commit {head[:12]}" in md, md[-1500:]
    assert _sh(q, "render", run_dir, cwd=work, env=env) == md, "rendered again from evidence"
