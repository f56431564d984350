"""Redaction of every byte the run writes: a key planted in the server's environment, its
arguments and its output (stdout, stderr, headers, bodies) and in the run log is found nowhere
in the evidence, though the server printed it."""

from __future__ import annotations

import asyncio
import secrets
import sys
from pathlib import Path

import house_run as h
import pytest
import structlog

from qualify.candidate import load_candidate
from qualify.evidence import logs
from qualify.evidence.store import Attempt, ChunkedWriter, EvidenceStore
from qualify.redact import REDACTED, Redactor
from qualify.serving.lanes import Lanes

STUB = Path(__file__).with_name("stub_server.py")


def stub_candidate(tmp_path: Path) -> Path:
    text = h.EXAMPLE.read_text()
    start = text.index("[server]")
    end = text.index("# Reasoning levels")
    server = f"""[server]
base_url = "http://127.0.0.1:{{port}}"
health_path = "/health"
api_key_env = "QUALIFY_STUB_KEY"
startup_timeout_s = 30
request_timeout_s = 10
stop_grace_s = 5

[server.launch]
command = [
  "sh", "-c", "exec {sys.executable} {STUB} --port {{port}} --api-key \\"$QUALIFY_STUB_KEY\\"",
]

"""
    path = tmp_path / "stub.toml"
    path.write_text(text[:start] + server + text[end:])
    return path


def test_a_planted_key_is_nowhere_in_the_evidence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = "sk-" + secrets.token_hex(16)
    monkeypatch.setenv("QUALIFY_STUB_KEY", key)
    loaded = load_candidate(stub_candidate(tmp_path))
    run = EvidenceStore(tmp_path / "ev").new_run(loaded.candidate.name)
    log_attempt = run.new_attempt("run")
    writer = log_attempt.stream("log", "jsonl")
    logs.configure(writer)

    async def go() -> None:
        lanes = Lanes(run, {"candidate": loaded})
        client = await lanes.use("candidate")
        ex = await client.get("/v1/models")
        assert ex.response_headers.get("x-echo-key") == key, "the stub did echo the key"
        run.new_attempt("probe").write_json("exchange.json", ex.evidence(run.redactor))
        structlog.get_logger().info("launched", env={"QUALIFY_STUB_KEY": key}, note=f"k={key}")
        await lanes.stop()

    try:
        asyncio.run(go())
    finally:
        logs.configure(None)
        log_attempt.seal()
    files = [p for p in run.path.rglob("*") if p.is_file()]
    server_logs = [p for p in files if p.name.startswith(("stdout", "stderr"))]
    assert server_logs and any(REDACTED.encode() in p.read_bytes() for p in server_logs)
    assert any(REDACTED.encode() in p.read_bytes() for p in files if p.name.startswith("log"))
    for p in files:
        data = p.read_bytes()
        for leak in (key, key[:10], key[-10:]):
            assert leak.encode() not in data, f"{p.relative_to(run.path)} holds the key"


def _attempt(tmp_path: Path, secret: str) -> Attempt:
    run = EvidenceStore(tmp_path).new_run("c")
    run.redactor.add(secret)
    return run.new_attempt("s")


def test_a_secret_split_across_stream_writes_is_redacted(tmp_path: Path) -> None:
    a = _attempt(tmp_path, "hunter2-secret")
    w = a.stream("stderr")
    for piece in (b"line one hun", b"ter2-sec", b"ret and hunter2", b"-secret\nhun"):
        w.write(piece)
    a.seal()
    text = (a.path / "stderr.000.log").read_text()
    assert text == f"line one {REDACTED} and {REDACTED}\nhun"


def test_raw_files_are_redacted_too(tmp_path: Path) -> None:
    a = _attempt(tmp_path, "s3cr3t-value")
    a.write_bytes("raw.bin", b"\x00s3cr3t-value\xff")
    a.seal()
    assert (a.path / "raw.bin").read_bytes() == b"\x00" + REDACTED.encode() + b"\xff"


def test_held_back_bytes_are_only_a_secrets_beginning() -> None:
    r = Redactor({"abcdef"})
    assert (r.held_back(b"xxabc"), r.held_back(b"xxabd"), r.held_back(b"")) == (3, 0, 0)
    assert isinstance(ChunkedWriter, type)
