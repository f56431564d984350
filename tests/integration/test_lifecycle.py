"""Server lifecycle on the real llama-server: failed starts, a killed server, Ctrl-C, resume."""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration


def _pids_on(port: int) -> list[int]:
    """Processes whose command line serves the given port (llama-server or a stand-in)."""
    found = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            cmd = (d / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"--port" in cmd and str(port).encode() in cmd:
            found.append(int(d.name))
    return found


def _start(cand: Path, evidence: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "qualify", "run", str(cand), "--evidence", str(evidence), *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for(cond: Callable[[], bool], timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.05)
    raise AssertionError("condition not met in time")


def _run_dir(evidence: Path) -> Path:
    (run,) = [p for p in evidence.glob("*/*") if (p / "run.json").exists()]
    return run


def _digests(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in root.rglob("*")
        if p.is_file()
    }


def _launch(cand: Path, command: str) -> None:
    text = re.sub(r"(?s)command = \[.*?\]\n", f"command = {command}\n", cand.read_text(), count=1)
    cand.write_text(text)


def test_failed_start_keeps_logs_and_exits_3(candidate_factory, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A server that exits before it is healthy: exit 3, its stderr kept, the path named."""
    cand = candidate_factory(18011, stages=["identity"])
    _launch(cand, '["{llama_server}", "-m", "/nonexistent/model.gguf", "--port", "18011"]')
    ev = tmp_path / "ev"
    proc = _start(cand, ev)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 3, err
    run = _run_dir(ev)
    attempt = run / "server-candidate" / "attempt-001"
    assert str(attempt) in err
    logs = b"".join(p.read_bytes() for p in attempt.glob("std*.log"))
    assert b"nonexistent" in logs
    assert (attempt / "manifest.json").exists()
    result = json.loads((run / "identity" / "attempt-001" / "result.json").read_text())
    assert result["verdict"] == "error" and result["status"] == "aborted"


def test_startup_timeout_stops_the_process(candidate_factory, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A server never healthy within startup_timeout_s: exit 3 and no process left behind."""
    cand = candidate_factory(
        18012, stages=["identity"], replace={"startup_timeout_s = 120": "startup_timeout_s = 2"}
    )
    _launch(cand, f'["{sys.executable}", "-c", "import time; time.sleep(120)", "--port", "18012"]')
    proc = _start(cand, tmp_path / "ev")
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 3, err
    assert "not healthy" in err and "after 2 s" in err
    assert _pids_on(18012) == []


def test_killed_server_aborts_with_error_and_keeps_evidence(
    candidate_factory, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    """Killing the server mid-stage: exit 3, stage `error`, logs kept, written files unchanged;
    a resume keeps the finished stage and adds a new attempt of the aborted one."""
    cand = candidate_factory(18013, stages=["identity", "preflight"])
    ev = tmp_path / "ev"
    proc = _start(cand, ev)
    _wait_for(lambda: any(ev.glob("*/*/preflight/attempt-001/0002-*.json")))
    run = _run_dir(ev)
    before = _digests(run)
    growing = {f: (run / f).read_bytes() for f in before if "/log." in f}
    (pid,) = _pids_on(18013)
    os.kill(pid, signal.SIGKILL)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 3, err
    result = json.loads((run / "preflight" / "attempt-001" / "result.json").read_text())
    assert result["verdict"] == "error" and result["status"] == "aborted"
    assert "server exited during the stage" in " ".join(result["reasons"])
    after = _digests(run)
    # The run's log is an append-only stream still open at the kill: it may only grow.
    changed = [f for f, d in before.items() if after.get(f) != d and f not in growing]
    assert changed == []
    for f, head in growing.items():
        assert (run / f).read_bytes().startswith(head)
    server = run / "server-candidate" / "attempt-001"
    assert any(server.glob("stderr.*.log")) and (server / "manifest.json").exists()

    again = _start(cand, ev, "--resume", run.name)
    _wait_for(lambda: (run / "preflight" / "attempt-002").exists())
    again.send_signal(signal.SIGINT)
    again.communicate(timeout=120)
    assert not (run / "identity" / "attempt-002").exists()
    assert _pids_on(18013) == []


def test_ctrl_c_stops_the_server_and_seals(candidate_factory, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Ctrl-C mid-run: exit 3, no server left running, every attempt sealed."""
    cand = candidate_factory(18014, stages=["identity", "preflight"])
    ev = tmp_path / "ev"
    proc = _start(cand, ev)
    _wait_for(lambda: any(ev.glob("*/*/preflight/attempt-001/0001-*.json")))
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 3, err
    assert _pids_on(18014) == []
    run = _run_dir(ev)
    attempts = [p for p in run.glob("*/attempt-*") if p.is_dir()]
    assert attempts and all((p / "manifest.json").exists() for p in attempts)
