"""Model-written code reaches no network and writes nowhere but its scratch directory."""

from __future__ import annotations

import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from qualify.quality import sandbox
from qualify.quality.sandbox import run_python


@pytest.fixture(params=["unshare", "audit-hook"])
def mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each test runs with the namespace (where this machine allows one) and with the hook
    alone, as on a machine where unprivileged user namespaces are off."""
    if request.param == "unshare" and sandbox.isolation() != "unshare":
        pytest.skip("unshare -rn is not allowed on this machine")
    monkeypatch.setattr(sandbox, "isolation", lambda: request.param)
    return str(request.param)


@pytest.fixture
def listener() -> Iterator[int]:
    """A TCP port on loopback that accepts connections (outside the sandbox)."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    try:
        yield srv.getsockname()[1]
    finally:
        srv.close()


def run_code(tmp_path: Path, code: str, limit_s: float = 10.0) -> sandbox.RunResult:
    (tmp_path / "probe.py").write_text(code)
    return run_python(tmp_path / "probe.py", tmp_path, limit_s)


def connect_code(port: int) -> str:
    return (
        "import socket\ns = socket.socket()\ns.settimeout(3)\n"
        f"s.connect(('127.0.0.1', {port}))\nprint('connected')\n"
    )


def test_the_probe_connects_outside_the_sandbox(tmp_path: Path, listener: int) -> None:
    """The same code, run plainly, does connect: the sandbox is what stops it."""
    (tmp_path / "probe.py").write_text(connect_code(listener))
    done = subprocess.run(
        [sys.executable, str(tmp_path / "probe.py")], capture_output=True, text=True, timeout=30
    )
    assert done.stdout == "connected\n", done.stderr


def test_socket_connect_fails_inside(tmp_path: Path, listener: int, mode: str) -> None:
    result = run_code(tmp_path, connect_code(listener))
    assert result.isolation == mode
    assert "connected" not in result.stdout
    assert result.returncode != 0 and not result.finished
    assert "PermissionError: sandbox: no network (socket.connect)" in result.stderr


def test_write_to_the_home_directory_fails_inside(tmp_path: Path, mode: str) -> None:
    target = Path.home() / f"qualify-sandbox-probe-{uuid.uuid4().hex}"
    code = f"open({str(target)!r}, 'w').write('escaped')\n"
    try:
        result = run_code(tmp_path, code)
        assert not target.exists()
    finally:
        target.unlink(missing_ok=True)
    assert "sandbox: no writing outside the scratch directory" in result.stderr
    assert result.returncode != 0


def test_other_ways_out_fail_inside(tmp_path: Path, mode: str) -> None:
    """os.open, renaming into home, and starting a process are refused too."""
    home = Path.home()
    for code, said in [
        (f"import os\nos.open({str(home / 'x')!r}, os.O_WRONLY | os.O_CREAT)", "no writing"),
        (f"import os\nopen('a', 'w').close()\nos.rename('a', {str(home / 'a')!r})", "os.rename"),
        ("import subprocess\nsubprocess.run(['true'])", "subprocess.Popen is not allowed"),
    ]:
        result = run_code(tmp_path, code)
        assert said in result.stderr, (code, result.stderr)
        assert not result.finished


def test_writing_inside_scratch_is_allowed(tmp_path: Path, mode: str) -> None:
    result = run_code(tmp_path, "open('out.txt', 'w').write('ok')\nprint(open('out.txt').read())")
    assert result.finished and result.stdout == "ok\n", result.stderr
    assert (tmp_path / "out.txt").read_text() == "ok"


def test_a_run_past_its_limit_is_stopped(tmp_path: Path) -> None:
    result = run_code(tmp_path, "while True:\n    pass\n", limit_s=1.0)
    assert result.timed_out and not result.finished
    assert result.why_not(1.0) == "the code did not finish within its 1 s time limit"


def test_printing_the_nonce_line_cannot_fake_a_finish(tmp_path: Path) -> None:
    """Only the boot code knows the nonce; an early clean exit is not a finished run."""
    result = run_code(tmp_path, "import os\nprint('done')\nos._exit(0)\n")
    assert result.returncode == 0 and not result.finished
    assert result.why_not(10.0) == (
        "the check failed (exit code 0): it stopped before the check's last line"
    )
