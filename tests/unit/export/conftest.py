"""The published signed runs exported once per session; `export_checks` importable by name
(tests/integration's export tests import it too)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from export_checks import KEY, LOAD_RUNS, ROOMY, Exported, unpack_gpu, unpack_load


@pytest.fixture(scope="session")
def gpu_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return unpack_gpu(tmp_path_factory.mktemp("gpu"))


@pytest.fixture(scope="session")
def roomy(gpu_runs: Path, tmp_path_factory: pytest.TempPathFactory) -> Exported:
    """The published H200 roomy run: every stage, gates of every verdict but error."""
    return Exported(gpu_runs / ROOMY, KEY, tmp_path_factory.mktemp("roomy-export"))


@pytest.fixture(scope="session", params=sorted(LOAD_RUNS))
def load_run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Exported:
    """A published load run: open-loop steps, the burst, the soak (and an incumbent lane)."""
    run, key = unpack_load(request.param, tmp_path_factory.mktemp(request.param))
    return Exported(run, key, tmp_path_factory.mktemp(f"{request.param}-export"))
