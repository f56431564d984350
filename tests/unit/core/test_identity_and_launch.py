"""Identity comparison for each engine's shapes, and the commands a launch would run."""

from __future__ import annotations

from pathlib import Path

import pytest

from qualify.candidate import Identity, load_candidate
from qualify.errors import BadInput
from qualify.evidence.store import EvidenceStore
from qualify.identity.stage import _reported_llamacpp, _reported_openai, compare
from qualify.records import Verdict
from qualify.serving.process import ServerProcess

ROOT = Path(__file__).resolve().parents[3]


def _pins(**kw: object) -> Identity:
    base = dict(
        model="m",
        revision="r",
        engine="vllm",
        engine_build="0.33.0",
        quantization="fp8",
        kv_dtype="fp8",
        context_length=131072,
    )
    base.update(kw)
    return Identity.model_validate(base)


def test_vllm_shapes_pass_and_fail() -> None:
    """vLLM's /v1/models max_model_len and /version are held to the pins; a mismatch shows both."""
    models = {"object": "list", "data": [{"id": "m", "root": "/models/m", "max_model_len": 65536}]}
    reported = _reported_openai(models, {"version": "0.33.0"})
    gates = {g.gate: g for g in compare(_pins(), reported)}
    assert gates["model"].verdict is Verdict.PASS
    assert gates["engine_build"].verdict is Verdict.PASS
    assert gates["context_length"].verdict is Verdict.FAIL
    assert gates["context_length"].reasons == ["pinned context_length 131072, server reports 65536"]


def test_llamacpp_props_give_context_build_quantization() -> None:
    """llama-server's per-slot n_ctx times slots, build_info and model_ftype are compared."""
    models = {"data": [{"id": "x", "aliases": ["m"]}]}
    props = {
        "default_generation_settings": {"n_ctx": 4096},
        "total_slots": 2,
        "build_info": "b1-0c1e570",
        "model_ftype": "Q4_1",
    }
    pins = _pins(
        engine="llama.cpp",
        engine_build="b1-0c1e570",
        quantization="Q4_1",
        context_length=8192,
        max_num_seqs=2,
    )
    gates = compare(pins, _reported_llamacpp(models, props))
    assert {g.gate: g.verdict for g in gates} == {
        "model": Verdict.PASS,
        "context_length": Verdict.PASS,
        "engine_build": Verdict.PASS,
        "quantization": Verdict.PASS,
        "max_num_seqs": Verdict.PASS,
    }


def test_unreported_pins_are_not_gates() -> None:
    """A pin the server does not report makes no gate (it is listed as not reported instead)."""
    gates = compare(_pins(), {"model": ["m"]})
    assert [g.gate for g in gates] == ["model"]


def test_container_launch_command(tmp_path: Path) -> None:
    """A container launch runs the image by digest with its volumes, env and args."""
    loaded = load_candidate(ROOT / "examples" / "deepseek-v4-flash-0731" / "candidate.toml")
    attempt = EvidenceStore(tmp_path).new_run("c").new_attempt("server-candidate")
    cmd = ServerProcess(loaded, attempt).command()
    assert cmd[:5] == ["docker", "run", "-d", "--network", "host"]
    assert "--gpus" in cmd and "dsv4-models:/models" in cmd
    image = loaded.candidate.server.container.image  # type: ignore[union-attr]
    assert cmd[cmd.index(image) + 1 : cmd.index(image) + 3] == ["vllm", "serve"]


def test_unknown_placeholder_is_bad_input(tmp_path: Path) -> None:
    """A launch command naming an unknown placeholder is refused with its index."""
    src = (ROOT / "examples" / "smollm2" / "candidate.toml").read_text()
    cand = tmp_path / "c.toml"
    cand.write_text(src.replace('"{llama_server}", "-m"', '"{llama_srv}", "-m"'))
    loaded = load_candidate(cand)
    attempt = EvidenceStore(tmp_path).new_run("c").new_attempt("server-candidate")
    with pytest.raises(BadInput) as exc:
        ServerProcess(loaded, attempt).command()
    assert "server.launch.command[0]" in exc.value.render()
