"""`qualify init --attach URL` against the real local llama-server, then the written candidate
run for real: two commands from a running server to a first `qualify run`.

Two servers, started as a user would start them (the demo's flags, one slot of 4,096 tokens):
the candidate with ngram-mod speculation, the control without. `init` reads both as identity
reads them; the candidate validates, and its identity and preflight stages run against the
server it was written from."""

from __future__ import annotations

import json
import re
import subprocess
import tomllib
from pathlib import Path

import pytest
from conftest import start_llama_server

from qualify.cli import main
from qualify.serving.local import LocalPaths

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


def _serve(paths: LocalPaths, *extra: str) -> tuple[subprocess.Popen[bytes], str]:
    template = paths.templates / "Qwen-Qwen3-0.6B.jinja"
    return start_llama_server(
        paths,
        *("--alias", "SmolLM2-135M-Instruct", "-c", "4096", "-np", "1", "-t", "1"),
        *("--metrics", "--chat-template-file", str(template), *extra),
    )


def _flat(text: str) -> str:
    """The file's comments as running text (a comment may wrap anywhere)."""
    return text.replace("\n# ", " ")


def test_init_writes_a_candidate_that_runs(
    local_server: LocalPaths,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every pin llama-server reports is filled with where it was read; the launch flags it does
    not report (KV dtype, split mode, the speculative method) say so. The control's server
    drafts in no slot, which proves its speculation off: the control's one override. The written
    candidate validates, and `qualify run` of identity and preflight passes every pin read."""
    monkeypatch.setenv("QUALIFY_TICKETS", str(tmp_path / "tickets"))
    monkeypatch.delenv("QUALIFY_HOUSE", raising=False)
    servers = [_serve(local_server, "--spec-type", "ngram-mod"), _serve(local_server)]
    try:
        (_, url), (_, control_url) = servers
        out = tmp_path / "candidate.toml"
        argv = ["init", "--attach", url, "--control-url", control_url, "--out", str(out)]
        assert main(argv) == 0, capsys.readouterr().err
        assert f"next: qualify run {out}" in capsys.readouterr().out
        text = out.read_text()
        ident = tomllib.loads(text)["identity"]
        build = ident.pop("engine_build")
        assert re.fullmatch(r"b\d+-[0-9a-f]+", build), build
        assert ident == {
            "model": "SmolLM2-135M-Instruct",
            "revision": "unknown",
            "engine": "llama.cpp",
            "quantization": "Q4_1",
            "kv_dtype": "unknown",
            "context_length": 4096,
            "max_num_seqs": 1,
        }
        assert "# read from GET /props build_info\n" in text
        assert "# read from GET /props total_slots\nmax_num_seqs = 1\n" in text
        flat = _flat(text)
        assert "not reported by llama.cpp: set it by hand (attached" in flat
        assert "GET /slots says the slots draft" in flat
        assert "\n# speculation = {" in text and "\n# parallelism = {" in text
        assert "thinking switch (enable_thinking) in its chat template" in flat
        control = tomllib.loads((tmp_path / "control.toml").read_text())
        assert control["variable"] == "speculative decoding off"
        assert control["overrides"] == {
            "server.base_url": control_url,
            "identity.speculation": {"method": "none", "draft_tokens": 0},
        }
        assert main(["validate", str(out)]) == 0
        _run(out, tmp_path / "evidence")
    finally:
        for proc, _ in servers:
            proc.terminate()
            proc.wait(timeout=30)


def _run(candidate: Path, evidence: Path) -> None:
    """`qualify run` of the written candidate, its stages cut to identity and preflight (small
    answers, one reasoning level): no-promote (pins to set by hand are inconclusive), yet every
    pin the server reported passes."""
    text = re.sub(r"(?m)^run = \[.*\]$", 'run = ["identity", "preflight"]', candidate.read_text())
    text = text.replace('[reasoning.think]\nreasoning_effort = "medium"\n', "")
    candidate.write_text(text + "\n[stages.preflight]\nmax_tokens = 48\ntimeout_s = 60\n")
    rc = main(["run", str(candidate), "--evidence", str(evidence)])
    assert rc == 1, "no-promote: the pins to set by hand are inconclusive"
    (result,) = evidence.glob("*/*/identity/attempt-001/result.json")
    verdicts = {g["gate"]: g["verdict"] for g in json.loads(result.read_text())["gates"]}
    assert verdicts.pop("reachable") == "pass"
    passed = {"model", "engine", "engine_build", "quantization", "context_length", "max_num_seqs"}
    assert {g.removeprefix("pin@") for g, v in verdicts.items() if v == "pass"} == passed
    assert set(verdicts.values()) == {"pass", "inconclusive"}, verdicts
    assert list(evidence.glob("*/*/preflight/attempt-001/result.json"))
