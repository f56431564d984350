"""`qualify export` refuses what it cannot vouch for, as `qualify diff` does: an unsigned run, a
run that does not verify (a byte changed, another key), an output inside the sealed run, no
output asked for. Each is exit 2 with the file and what was expected, and nothing is written."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from export_checks import KEY, ROOT, TIGHT

from qualify.cli import main


@pytest.fixture
def tight(gpu_runs: Path, tmp_path: Path) -> Path:
    """A copy of the published tight run, free to doctor."""
    dest = tmp_path / "copy" / Path(TIGHT).name
    shutil.copytree(gpu_runs / TIGHT, dest)
    for d, _, files in os.walk(dest):
        os.chmod(d, 0o755)
        for f in files:
            os.chmod(Path(d) / f, 0o644)
    return dest


def _export(run: Path, out: Path, *extra: str) -> int:
    return main(["export", str(run), "--junit", str(out / "j.xml"), "--csv", str(out), *extra])


def test_an_unsigned_run_is_refused(
    tight: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tight / "decision" / "attempt-001.dsse.json").unlink()
    out = tmp_path / "out"
    assert _export(tight, out, "--key", str(KEY)) == 2
    err = capsys.readouterr().err
    assert f"{tight}/decision/attempt-NNN.dsse.json" in err and "not exported" in err
    assert not out.exists()


def test_a_doctored_run_is_refused(
    tight: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = tight / "ab" / "attempt-001" / "result.json"
    data = bytearray(result.read_bytes())
    data[len(data) // 2] ^= 0x01
    result.write_bytes(bytes(data))
    out = tmp_path / "out"
    assert _export(tight, out, "--key", str(KEY)) == 2
    err = capsys.readouterr().err
    assert "it does not verify; nothing is exported" in err
    assert "ab/attempt-001/result.json: changed" in err
    assert not out.exists()


def test_another_key_is_refused(tight: Path, tmp_path: Path) -> None:
    other = ROOT / "docs" / "gpu" / "vllm" / "gpu.pub"
    assert other.read_bytes() != KEY.read_bytes()
    out = tmp_path / "out"
    assert _export(tight, out, "--key", str(other)) == 2
    assert not out.exists()


def test_an_output_inside_the_run_is_refused(
    tight: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["export", str(tight), "--key", str(KEY), "--junit", str(tight / "junit.xml")]
    assert main(args) == 2
    assert "--junit: expected a path outside the sealed run" in capsys.readouterr().err
    assert not (tight / "junit.xml").exists()


def test_nothing_to_export_and_a_bad_gateway_are_bad_input(
    tight: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["export", str(tight), "--key", str(KEY)]) == 2
    assert "expected at least one" in capsys.readouterr().err
    assert main(["export", str(tight), "--key", str(KEY), "--pushgateway", "ftp://x"]) == 2
    assert "--pushgateway: expected http(s)://HOST:PORT" in capsys.readouterr().err
