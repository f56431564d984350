"""`qualify init --attach URL` against the real local llama-server, then the written candidate
run for real: two commands from a running server to a first `qualify run`.

Two servers, started as a user would start them (the demo's flags, one slot of 4,096 tokens):
the candidate with ngram-mod speculation, the control without. `init` reads both as identity
reads them; the candidate validates, and its identity and preflight stages run against the
server it was written from. Every command is the installed wheel's (`installed`: built from
this tree into a fresh venv), run from a directory outside the checkout under a house set up
with the example policy the wheel ships: this is the suite's real run of the installed tool."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from conftest import outside_env, sh, start_llama_server

from qualify.present.record import DecisionRecord
from qualify.serving.local import LocalPaths

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit" / "export"))
from export_checks import assert_junit_agrees

ROOT = Path(__file__).resolve().parents[2]

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
    local_server: LocalPaths, installed: Path, tmp_path: Path
) -> None:
    """Every pin llama-server reports is filled with where it was read; the launch flags it does
    not report (KV dtype, split mode, the speculative method) say so. The control's server
    drafts in no slot, which proves its speculation off: the control's one override. The written
    candidate validates, and `qualify run` of identity and preflight passes every pin read."""
    work, env = tmp_path / "work", outside_env(tmp_path)
    work.mkdir()
    servers = [_serve(local_server, "--spec-type", "ngram-mod"), _serve(local_server)]
    try:
        (_, url), (_, control_url) = servers
        argv = ("init", "--attach", url, "--control-url", control_url, "--out", "candidate.toml")
        assert "next: qualify run candidate.toml" in sh(installed, *argv, cwd=work, env=env)
        out = work / "candidate.toml"
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
        control = tomllib.loads((work / "control.toml").read_text())
        assert control["variable"] == "speculative decoding off"
        assert control["overrides"] == {
            "server.base_url": control_url,
            "identity.speculation": {"method": "none", "draft_tokens": 0},
        }
        sh(installed, "validate", "candidate.toml", cwd=work, env=env)
        _run(installed, work, env)
    finally:
        for proc, _ in servers:
            proc.terminate()
            proc.wait(timeout=30)


def _run(q: Path, work: Path, env: dict[str, str]) -> None:
    """`qualify run` of the written candidate, its stages cut to identity and three preflight
    gates (small answers, one reasoning level), signed under a house made from the example
    policy the wheel ships: no-promote (pins to set by hand are inconclusive, most stages not
    run), yet every pin the server reported passes. The signed decision verifies, renders the
    same again, names the code that ran (the wheel and its commit), and exports as JUnit with
    the decision's verdicts."""
    candidate = work / "candidate.toml"
    text = re.sub(r"(?m)^run = \[.*\]$", 'run = ["identity", "preflight"]', candidate.read_text())
    text = text.replace('[reasoning.think]\nreasoning_effort = "medium"\n', "")
    # Three preflight gates (a plain answer, a schema, a typed tool call): the rest are the
    # preflight test's; the decision still counts every declared gate (missing: no-promote).
    pick = 'gates = ["smoke", "json", "typed-tools"]\n'
    candidate.write_text(text + f"\n[stages.preflight]\nmax_tokens = 48\ntimeout_s = 60\n{pick}")
    house, key = work / "house", work / "keys" / "ci"
    sh(q, "keygen", "--out", key, cwd=work, env=env)
    sh(q, "house", "init", house, "--policy", "example", cwd=work, env=env)
    pin = ("house", "pin", "decision", f"{key}.pub", "--name", "ci", "--why", "CI signs")
    sh(q, *pin, "--house", house, cwd=work, env=env)
    run = ("run", "candidate.toml", "--key", f"{key}.key", "--house", house)
    sh(q, *run, "--evidence", "evidence", cwd=work, env=env, ok=1)  # 1: no-promote
    (run_dir,) = [r.parent for r in (work / "evidence").glob("*/*/run.json")]
    result = run_dir / "identity/attempt-001/result.json"
    verdicts = {g["gate"]: g["verdict"] for g in json.loads(result.read_text())["gates"]}
    assert verdicts.pop("reachable") == "pass"
    # A server outside a container has no image to pin: image_digest passes as "not pinned".
    passed = {"model", "engine", "engine_build", "quantization", "context_length", "max_num_seqs"}
    passed |= {"image_digest"}
    assert {g.removeprefix("pin@") for g, v in verdicts.items() if v == "pass"} == passed
    assert set(verdicts.values()) == {"pass", "inconclusive"}, verdicts
    assert (run_dir / "preflight/attempt-001/result.json").is_file()
    tool = json.loads((run_dir / "run.json").read_text())["tool"]
    head = sh("git", "rev-parse", "HEAD", cwd=ROOT).strip()
    assert tool["installed"] == "wheel" and tool["commit"] == head, tool
    sh(q, "verify", run_dir / "decision/attempt-001.dsse.json", "--house", house, cwd=work, env=env)
    md = (run_dir / "decision/attempt-001/decision.md").read_text()
    assert f"(wheel of commit {head[:12]}" in md
    assert sh(q, "render", run_dir, cwd=work, env=env) == md, "rendered again from evidence"
    sh(q, "export", run_dir, "--junit", "junit.xml", "--house", house, cwd=work, env=env)
    record = DecisionRecord.model_validate_json(
        (run_dir / "decision/attempt-001/decision.json").read_bytes()
    )
    assert_junit_agrees(work / "junit.xml", record)
