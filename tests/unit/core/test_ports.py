"""Ports: a launch on `{port}` gets one the OS reports free, so two runs never collide."""

from __future__ import annotations

from pathlib import Path

import pytest

from qualify.candidate import load_candidate
from qualify.errors import BadInput
from qualify.evidence.store import EvidenceStore
from qualify.serving.process import ServerProcess

ROOT = Path(__file__).resolve().parents[3]


def test_port_placeholder_gets_a_free_port_per_launch(tmp_path: Path) -> None:
    """`{port}` in the base URL and the command: each launch gets a port the OS reports free,
    the same one in both, and two launches at once never share one."""
    src = (ROOT / "examples" / "smollm2" / "candidate.toml").read_text()
    cand = tmp_path / "c.toml"
    cand.write_text(src.replace("8091", "{port}"))
    loaded = load_candidate(cand)
    run = EvidenceStore(tmp_path).new_run("c")
    one = ServerProcess(loaded, run.new_attempt("server-candidate"))
    two = ServerProcess(loaded, run.new_attempt("server-candidate"))
    cmd = one.command()
    assert one.port is not None and cmd[cmd.index("--port") + 1] == str(one.port)
    assert one.base_url == f"http://127.0.0.1:{one.port}"
    assert two.port != one.port


def test_port_in_command_only_is_bad_input(tmp_path: Path) -> None:
    """A command on `{port}` with a base URL on a fixed port could never be reached: refused."""
    src = (ROOT / "examples" / "smollm2" / "candidate.toml").read_text()
    cand = tmp_path / "c.toml"
    cand.write_text(src.replace('"--port", "8091"', '"--port", "{port}"'))
    attempt = EvidenceStore(tmp_path).new_run("c").new_attempt("server-candidate")
    with pytest.raises(BadInput) as exc:
        ServerProcess(load_candidate(cand), attempt).command()
    assert "{port} needs server.base_url to name {port} too" in exc.value.render()
