"""Server lifecycle on the real llama-server: failed starts, a killed server, Ctrl-C, resume.

Every server here listens on a port the OS picked at launch (`{port}`); the tests read it back
from the launch's evidence (`launch.json`).
"""

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
from typing import Any

import pytest

from qualify.errors import RunAborted

pytestmark = pytest.mark.integration


def _ports(run: Path) -> list[int]:
    """The ports this run's servers were launched on, from their `launch.json`."""
    return [json.loads(f.read_text())["port"] for f in sorted(run.glob("server-*/*/launch.json"))]


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


def _wait_for(cond: Callable[[], bool], timeout: float = 600.0) -> None:
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
    cand = candidate_factory("failed-start", stages=["identity"])
    _launch(cand, '["{llama_server}", "-m", "/nonexistent/model.gguf", "--port", "{port}"]')
    ev = tmp_path / "ev"
    proc = _start(cand, ev)
    _, err = proc.communicate(timeout=300)
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
        "timeout", stages=["identity"], replace={"startup_timeout_s = 120": "startup_timeout_s = 2"}
    )
    _launch(
        cand, f'["{sys.executable}", "-c", "import time; time.sleep(120)", "--port", "{{port}}"]'
    )
    ev = tmp_path / "ev"
    proc = _start(cand, ev)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 3, err
    assert "not healthy" in err and "after 2 s" in err
    (port,) = _ports(_run_dir(ev))
    assert _pids_on(port) == []


STUBS = Path(__file__).parent / "stubs"


def _growing(path: str) -> bool:
    """Files still open for appending while the run goes on: the run's log and the logs of a
    server that is still running. They may only grow."""
    name = path.rsplit("/", 1)[-1]
    return "/log." in path or (
        path.startswith("server-") and name.startswith(("stdout.", "stderr."))
    )


def test_killed_server_aborts_with_error_and_keeps_evidence(
    candidate_factory, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    """Killing the server mid-stage: exit 3, stage `error`, logs kept, written files unchanged;
    a resume keeps the finished stage and adds a new attempt of the aborted one."""
    cand = candidate_factory("killed", stages=["identity", "preflight"])
    ev = tmp_path / "ev"
    proc = _start(cand, ev)
    _wait_for(lambda: any(ev.glob("*/*/preflight/attempt-001/0002-*.json")), timeout=600)
    run = _run_dir(ev)
    before = _digests(run)
    growing = {f: (run / f).read_bytes() for f in before if _growing(f)}
    (port,) = _ports(run)
    (pid,) = _pids_on(port)
    os.kill(pid, signal.SIGKILL)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 3, err
    result = json.loads((run / "preflight" / "attempt-001" / "result.json").read_text())
    assert result["verdict"] == "error" and result["status"] == "aborted"
    assert "server crashed during the stage (SIGKILL)" in " ".join(result["reasons"])
    after = _digests(run)
    changed = [f for f, d in before.items() if after.get(f) != d and f not in growing]
    assert changed == []
    for f, head in growing.items():
        assert (run / f).read_bytes().startswith(head), f
    server = run / "server-candidate" / "attempt-001"
    assert any(server.glob("stderr.*.log")) and (server / "manifest.json").exists()

    again = _start(cand, ev, "--resume", run.name)
    _wait_for(lambda: (run / "preflight" / "attempt-002").exists(), timeout=600)
    again.send_signal(signal.SIGINT)
    again.communicate(timeout=300)
    assert not (run / "identity" / "attempt-002").exists()
    assert all(_pids_on(port) == [] for port in _ports(run))


def _interrupted(proc: subprocess.Popen[str], ev: Path) -> tuple[Path, str]:
    """SIGINT to a running `qualify run`; it must exit 3 with no server left and every
    attempt sealed."""
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 3, err
    assert "interrupted" in err
    run = _run_dir(ev)
    assert all(_pids_on(port) == [] for port in _ports(run))
    attempts = [p for p in run.glob("*/attempt-*") if p.is_dir()]
    assert attempts and all((p / "manifest.json").exists() for p in attempts), attempts
    outcome = json.loads(next(run.glob("run/attempt-*/outcome.json")).read_text())
    assert outcome["exit_code"] == 3 and "interrupted" in outcome["aborted"]
    return run, err


@pytest.mark.parametrize(
    ("stages", "started", "stage"),
    [
        # between two preflight gates: the first gate's exchange is written
        (["identity", "preflight"], "preflight/attempt-001/0001-*.json", "preflight"),
        # once a later stage has started; nothing after it (vram) may finish
        (["identity", "context", "vram"], "context/attempt-001", "context"),
    ],
    ids=["between-preflight-gates", "in-the-context-stage"],
)
def test_ctrl_c_on_the_real_server_stops_the_run(  # type: ignore[no-untyped-def]
    candidate_factory, tmp_path: Path, stages: list[str], started: str, stage: str
) -> None:
    """Ctrl-C while a stage runs on the real server: exit 3, that stage aborted, none after."""
    cand = candidate_factory(f"ctrl-c-{stage}", stages=stages)
    ev = tmp_path / "ev"
    proc = _start(cand, ev)
    _wait_for(lambda: any(ev.glob(f"*/*/{started}")), timeout=600)
    run, _ = _interrupted(proc, ev)
    result = json.loads((run / stage / "attempt-001" / "result.json").read_text())
    assert result["status"] == "aborted"
    assert not (run / "vram").exists() or _statuses(run, "vram") != ["finished"]


def test_ctrl_c_during_start_up(candidate_factory, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Ctrl-C while the server is starting (a process that never becomes healthy)."""
    cand = candidate_factory("ctrl-c-start", stages=["identity", "preflight"])
    _launch(
        cand, f'["{sys.executable}", "-c", "import time; time.sleep(600)", "--port", "{{port}}"]'
    )
    ev = tmp_path / "ev"
    proc = _start(cand, ev)
    _wait_for(lambda: any(ev.glob("*/*/server-candidate/attempt-001/launch.json")), timeout=120)
    run, _ = _interrupted(proc, ev)
    assert not (run / "preflight" / "attempt-001" / "0001-smoke.json").exists()


def test_ctrl_c_with_a_request_in_flight(candidate_factory, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Ctrl-C while a request is in flight (a server that never answers a POST): exit 3 long
    before the request timeout would have ended it."""
    marks = tmp_path / "marks"
    cand = candidate_factory("ctrl-c-flight", stages=["preflight"])
    _launch(
        cand,
        f'["{sys.executable}", "{STUBS / "hanging_server.py"}", "--port", "{{port}}", '
        f'"--marks", "{marks}"]',
    )
    ev = tmp_path / "ev"
    proc = _start(cand, ev)
    _wait_for(lambda: (marks / "posted-1").exists(), timeout=120)
    run, _ = _interrupted(proc, ev)
    result = json.loads((run / "preflight" / "attempt-001" / "result.json").read_text())
    assert result["status"] == "aborted" and "interrupted" in " ".join(result["reasons"])


def test_server_crash_at_start_up_is_named(candidate_factory, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A server that dies of SIGSEGV at start-up: exit 3, the signal named, its last log lines
    quoted, its log linked, and a document that says the candidate was not qualified."""
    cand = candidate_factory("segv", stages=["identity", "preflight", "quality"])
    _launch(cand, f'["{sys.executable}", "{STUBS / "segv_server.py"}", "--port", "{{port}}"]')
    ev = tmp_path / "ev"
    proc = _start(cand, ev)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 3, err
    assert "crashed during start-up (SIGSEGV)" in err
    run = _run_dir(ev)
    result = json.loads((run / "identity" / "attempt-001" / "result.json").read_text())
    why = " ".join(result["reasons"])
    assert "the candidate server crashed during start-up (SIGSEGV)" in why
    assert "«init: llama threadpool init, n_threads = 2»" in why
    assert "server-candidate/attempt-001/stderr.000.log" in why
    (doc,) = run.glob("decision/attempt-*/decision.md")
    text = doc.read_text()
    first = text.splitlines()[0]
    assert "not qualified" in first and "SIGSEGV" in first, first
    assert "no-promote" not in first
    assert "init: llama threadpool init" in text
    assert "server-candidate/attempt-001/stderr.000.log" in text
    # Named in the title, the first line and the closing Decision paragraph; never once per
    # stage that did not run ("the run was aborted earlier (...)" seven times).
    assert text.count("crashed during start-up") <= 3, text
    assert "aborted earlier" not in text


# A lean demo: one preflight gate, one short context target, a two-run A/B on two prompts with
# 16-token answers; the shape of the run is what is tested here, not its figures.
LEAN_AB = 'runs = 2\nmax_tokens = 16\nwarmups = 0\nprompts = "prompts.yaml"'
LEAN = {
    "max_tokens = 192": 'gates = ["smoke"]\nmax_tokens = 32',
    "targets = [1024, 4096]": "targets = [1024]",
    "max_tokens = 64": "max_tokens = 16",
    "runs = 3\nmax_tokens = 128": LEAN_AB,
    "budget_scale = 0.0625": 'budget_scale = 0.0625\ntasks = ["bullets-risks"]\ncontrol = false',
    "lengths = [256, 2048]\nconcurrency = [1, 2]\nruns = 1": (
        "lengths = [128]\nconcurrency = [1]\nruns = 1\nincumbent = false"
    ),
    "load = { length = 256,": "load = { enabled = false, length = 256,",
    "soak = { rate_fraction = 0.75 }": "soak = { enabled = false }",
    'kinds = ["prose", "code", "json", "list"]\nkind_depths = [1024]': (
        'kinds = ["prose"]\nkind_depths = [128]'
    ),
}
ORDER = ["identity", "preflight", "quality", "context", "ab", "capacity", "vram"]


def _lean_prompts(cand: Path) -> None:
    import yaml

    from qualify.ab.prompts import shipped_path

    shipped = yaml.safe_load(shipped_path().read_text())
    (cand.parent / "prompts.yaml").write_text(
        yaml.safe_dump({**shipped, "prompts": shipped["prompts"][:2]}, sort_keys=False)
    )


def _abort_in(stage: str, real: Any) -> Any:
    """`stage` as run, except that its server is killed (SIGKILL) as soon as the stage has it;
    VRAM, which has no server, aborts as a stage does when the run cannot go on."""

    async def aborting(ctx: Any) -> Any:
        if stage == "vram":
            raise RunAborted("aborted by the test in vram")
        use = ctx.lanes.use

        async def use_then_kill(lane: str) -> Any:
            client = await use(lane)
            proc = ctx.lanes.process
            if proc is not None and proc.alive():
                os.killpg(proc.proc.pid, signal.SIGKILL)
                proc.proc.wait()
            return client

        ctx.lanes.use = use_then_kill
        return await real(ctx)

    return aborting


def _statuses(run: Path, stage: str) -> list[str]:
    files = sorted(run.glob(f"{stage}/attempt-*/result.json"))
    return [json.loads(f.read_text())["status"] for f in files]


def test_an_abort_in_each_stage_then_resume_completes(  # type: ignore[no-untyped-def]
    candidate_factory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run aborted in identity is resumed, the resume aborted in preflight, and so on through
    every stage; each resume starts at the stage that did not finish, keeps the ones before
    it, runs it and every later one, and keeps the aborted attempts. The last one completes.

    After the abort in stage i, stage j has one `aborted` record for each abort before it and,
    once resumed past, one `finished` attempt: exactly what the assertions spell out."""
    from qualify import pipeline
    from qualify.progress import Progress
    from qualify.stage import STAGES, load_all

    cand = candidate_factory("resume", replace=LEAN)
    _lean_prompts(cand)
    ev = tmp_path / "ev"
    load_all()
    real = dict(STAGES)
    run: Path | None = None
    for i, stage in enumerate(ORDER):
        monkeypatch.setitem(STAGES, stage, _abort_in(stage, real[stage]))
        code = pipeline.execute(cand, ev, run.name if run else None, None, Progress(quiet=True))
        monkeypatch.setitem(STAGES, stage, real[stage])
        run = run or _run_dir(ev)
        assert code == 3, stage
        for j, other in enumerate(ORDER):
            expected = ["aborted"] * (min(i, j) + 1) + (["finished"] if j < i else [])
            assert _statuses(run, other) == expected, (stage, other)
    assert run is not None
    code = pipeline.execute(cand, ev, run.name, None, Progress(quiet=True))
    assert code in (0, 1)
    for j, stage in enumerate(ORDER):
        assert _statuses(run, stage) == ["aborted"] * (j + 1) + ["finished"], stage
    every = [p for p in run.glob("*/attempt-*") if p.is_dir()]
    assert all((p / "manifest.json").exists() for p in every)
    assert all(_pids_on(port) == [] for port in _ports(run))
