"""Shared fixtures: candidate files for the real local server, and a one-stage runner."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from stage_runs import StageRunner

from qualify.evidence.store import EvidenceStore
from qualify.pipeline import plan
from qualify.serving.local import LocalPaths
from qualify.serving.process import free_port

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "smollm2"


@pytest.fixture(scope="session")
def local_server() -> LocalPaths:
    """The real llama-server and model; `make test` builds them before pytest starts."""
    paths = LocalPaths("cpu")
    if not paths.ready():
        pytest.fail("the local llama-server is not built: run `qualify local-server build`")
    return paths


def write_candidate(
    directory: Path,
    port: int | None = None,
    stages: list[str] | None = None,
    replace: dict[str, str] | None = None,
    append: str = "",
) -> Path:
    """The demo candidate and control with only the named stages, their servers on `port`, or
    by default on `{port}`: a port the OS reports free at each launch, so runs never collide.
    The demo's trace replay and agent sessions are left out (a test that wants them names
    them: tests/integration/test_traffic.py), so each capacity test times only its own part."""
    directory.mkdir(parents=True, exist_ok=True)
    where = "{port}" if port is None else str(port)
    text = (EXAMPLE / "candidate.toml").read_text().replace("8091", where)
    text = re.sub(r"(?m)^(replay|sessions) = \{.*\}\n", "", text)
    control = (EXAMPLE / "control.toml").read_text().replace("8091", where)
    if stages is not None:
        listed = ", ".join(f'"{s}"' for s in stages)
        text = re.sub(r"(?m)^run = \[.*\]$", f"run = [{listed}]", text)
    for old, new in (replace or {}).items():
        assert old in text, f"{old!r} is not in the example candidate"
        text = text.replace(old, new)
    (directory / "candidate.toml").write_text(text + append)
    (directory / "control.toml").write_text(control)
    return directory / "candidate.toml"


@pytest.fixture
def candidate_factory(tmp_path: Path, local_server: LocalPaths) -> Callable[..., Path]:
    def make(label: int | str, **kw: object) -> Path:
        """A candidate in `cand-<label>/`; its servers launch on ports the OS picks."""
        return write_candidate(tmp_path / f"cand-{label}", **kw)  # type: ignore[arg-type]

    return make


@pytest.fixture
def stage_runner(tmp_path: Path) -> Iterator[Callable[[Path], StageRunner]]:
    made: list[StageRunner] = []

    def make(candidate: Path) -> StageRunner:
        p = plan(candidate)
        run = EvidenceStore(tmp_path / "evidence").new_run(p.loaded.candidate.name)
        (run.path / "run.json").write_text("{}")
        r = StageRunner(p, run)
        made.append(r)
        return r

    yield make
    from qualify.serving.process import stop_all

    stop_all()


def start_llama_server(paths: LocalPaths, *args: str) -> tuple[subprocess.Popen[bytes], str]:
    """The real llama-server with `args` (slots, context, metrics) on a port the OS reports
    free; launched again on a fresh port if another process took that one before it bound."""
    for _ in range(3):
        port = free_port()
        cmd = [str(paths.binary), "-m", str(paths.model), "--port", str(port)]
        proc = subprocess.Popen(
            [*cmd, "--host", "127.0.0.1", *args],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 120
        while proc.poll() is None:
            try:
                if httpx.get(url + "/health", timeout=2).status_code == 200:
                    return proc, url
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                proc.kill()
                proc.wait()
                raise AssertionError("llama-server did not become healthy")
            time.sleep(0.5)
    raise AssertionError("llama-server exited before it was healthy, three times")


def sh(*cmd: str | Path, cwd: Path, env: dict[str, str] | None = None, ok: int = 0) -> str:
    r = subprocess.run(
        [str(c) for c in cmd], cwd=cwd, capture_output=True, text=True, env=env, timeout=900
    )
    assert r.returncode == ok, f"{cmd} exited {r.returncode}:\n{r.stdout[-3000:]}\n{r.stderr}"
    return r.stdout


@pytest.fixture(scope="session")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`python -m build` (the sdist, then the wheel built from the sdist, as a release does;
    with the venv's setuptools, pinned in the lock),
    and a fresh venv holding that wheel; returns the venv's `qualify`."""
    base = tmp_path_factory.mktemp("installed")
    dist = base / "dist"
    sh(sys.executable, "-m", "build", "--no-isolation", "--outdir", dist, ROOT, cwd=base)
    (wheel,) = dist.glob("qualify-*.whl")
    venv = base / "venv"
    sh(sys.executable, "-m", "venv", venv, cwd=base)
    pip = venv / "bin" / "pip"
    sh(pip, "install", "-q", wheel, "-c", ROOT / "requirements-dev.lock", cwd=base)
    return venv / "bin" / "qualify"


def outside_env(tmp_path: Path) -> dict[str, str]:
    """The environment of a user's shell: no PYTHONPATH, none of the checkout's QUALIFY_*
    settings; tickets in `tmp_path`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("QUALIFY_", "PYTHON"))}
    env["QUALIFY_TICKETS"] = str(tmp_path / "tickets")
    return env
