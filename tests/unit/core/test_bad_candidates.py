"""Every malformed candidate exits 2 with one clear line naming the field, and writes nothing."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from qualify.cli import main

BAD = Path(__file__).resolve().parents[2] / "data" / "bad-candidates"
EXPECTED: dict[str, str] = json.loads((BAD / "expected.json").read_text())


@dataclass
class Outcome:
    returncode: int
    stdout: str
    stderr: str


@pytest.fixture
def qualify(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Callable[..., Outcome]:
    """`qualify ARGS` in this process (the CLI's `main`), from `tmp_path`, its output captured."""
    monkeypatch.chdir(tmp_path)

    def run(*args: str) -> Outcome:
        capsys.readouterr()
        code = main(list(args))
        out, err = capsys.readouterr()
        return Outcome(code, out, err)

    return run


def test_corpus_has_at_least_ten_kinds() -> None:
    """The corpus covers at least ten distinct kinds of bad input."""
    assert len(EXPECTED) >= 10


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_validate_rejects_with_field_message(name: str, qualify: Callable[..., Outcome]) -> None:
    """`qualify validate` exits 2, names the field and what was expected, no traceback."""
    r = qualify("validate", str(BAD / name))
    assert r.returncode == 2, r.stdout + r.stderr
    assert EXPECTED[name] in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
    assert name in r.stderr or "missing-base.toml" in r.stderr


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_run_rejects_and_writes_no_evidence(
    name: str, qualify: Callable[..., Outcome], tmp_path: Path
) -> None:
    """`qualify run` on bad input exits 2 before any evidence directory exists."""
    evidence = tmp_path / "evidence"
    r = qualify("run", str(BAD / name), "--evidence", str(evidence))
    assert r.returncode == 2, r.stdout + r.stderr
    assert EXPECTED[name] in r.stderr
    assert "Traceback" not in r.stderr
    assert not evidence.exists()


def test_debug_shows_traceback(qualify: Callable[..., Outcome]) -> None:
    """With --debug the traceback is shown as well as the message."""
    r = qualify("--debug", "validate", str(BAD / "wrong-type.toml"))
    assert r.returncode == 2
    assert "Traceback" in r.stderr and EXPECTED["wrong-type.toml"] in r.stderr


def test_missing_api_key_env_is_bad_input(qualify: Callable[..., Outcome], tmp_path: Path) -> None:
    """A candidate naming an unset API-key variable is refused by `run` before any evidence."""
    src = (BAD.parents[2] / "examples" / "smollm2" / "candidate.toml").read_text()
    cand = tmp_path / "c.toml"
    cand.write_text(
        src.replace(
            'health_path = "/health"',
            'api_key_env = "QUALIFY_TEST_UNSET_KEY"\nhealth_path = "/health"',
        ).replace('control = "control.toml"', "")
    )
    r = qualify("run", str(cand), "--evidence", str(tmp_path / "ev"))
    assert r.returncode == 2
    assert "server.api_key_env: environment variable QUALIFY_TEST_UNSET_KEY is not set" in r.stderr
    assert not (tmp_path / "ev").exists()


def test_examples_are_valid(qualify: Callable[..., Outcome]) -> None:
    """Both shipped examples, candidates and controls, validate."""
    ex = BAD.parents[2] / "examples"
    files = sorted(str(p) for p in ex.glob("*/*.toml") if p.parent.name != "house")
    assert len(files) >= 4
    r = qualify("validate", *files)
    assert r.returncode == 0, r.stderr
