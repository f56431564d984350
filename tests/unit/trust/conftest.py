"""The trust tests build on the decision tests' hand-made house and run (house_run)."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "decision"))


@pytest.fixture(autouse=True)
def _env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Tickets under the test's own folder, and no house from the environment."""
    monkeypatch.setenv("QUALIFY_TICKETS", str(tmp_path / "tickets"))
    monkeypatch.delenv("QUALIFY_HOUSE", raising=False)
