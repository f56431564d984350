"""`qualify validate` checks the gate files a candidate names, one line per problem, exit 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "smollm2"
ANCHOR = "[stages.preflight]\n"


def candidate(tmp: Path, extra: str) -> Path:
    text = (EXAMPLE / "candidate.toml").read_text()
    assert ANCHOR in text
    (tmp / "candidate.toml").write_text(text.replace(ANCHOR, ANCHOR + extra))
    (tmp / "control.toml").write_text((EXAMPLE / "control.toml").read_text())
    return tmp / "candidate.toml"


def validate(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "qualify", "validate", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )


def test_demo_candidate_is_valid() -> None:
    """The demo candidate, which runs every gate, validates."""
    done = validate(EXAMPLE / "candidate.toml")
    assert done.returncode == 0, done.stderr


def test_unknown_gate_id_is_one_line(tmp_path: Path) -> None:
    """An unknown id in stages.preflight.gates: exit 2, the field path, the ids, the value."""
    done = validate(candidate(tmp_path, 'gates = ["smoke", "smoek"]\n'))
    assert done.returncode == 2
    lines = [ln for ln in done.stderr.splitlines() if "smoek" in ln]
    assert len(lines) == 1
    assert "stages.preflight.gates[1]: expected a gate id from" in lines[0]
    assert "(got 'smoek')" in lines[0] and "'smoke'" in lines[0]
    assert "Traceback" not in done.stderr


def test_bad_gate_params_are_reported(tmp_path: Path) -> None:
    """A gates directory with a bad params value: the file, params path, expected and found."""
    gates = tmp_path / "gates"
    gates.mkdir()
    (gates / "smoke.yaml").write_text(
        "schema_version: 1\nid: smoke\ncheck: smoke\nstage: preflight\n"
        "params: {prompt: hi, max_tokens: -3}\n"
    )
    done = validate(candidate(tmp_path, 'gates_dir = "gates"\n'))
    assert done.returncode == 2
    assert (
        f"{gates / 'smoke.yaml'}: params.max_tokens: Input should be greater than 0 (got -3)"
        in (done.stderr)
    )
