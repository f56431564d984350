"""The incumbent from the alias table, the per-cell comparison, and the engine's own figures."""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from qualify.candidate import load_candidate
from qualify.capacity.engine import engine_capacity
from qualify.capacity.incumbent import compare, find_incumbent
from qualify.capacity.record import Engine, RunValues
from qualify.httpclient.client import Client
from qualify.trust.repository import ENV

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "smollm2" / "candidate.toml"


def _table(path: Path, target: Path, sha: str | None = None) -> None:
    digest = sha or hashlib.sha256(target.read_bytes()).hexdigest()
    path.write_text(
        'version = 1\n\n[aliases."demo-chat"]\n'
        f'candidate = "old"\ncandidate_path = {json.dumps(str(target))}\n'
        f'candidate_sha256 = "{digest}"\ndecision_sha256 = "{"0" * 64}"\nrun_id = "r1"\n'
    )


def _files(tmp: Path) -> tuple[Path, Path]:
    text = EXAMPLE.read_text()
    cand = tmp / "candidate.toml"
    cand.write_text(text)
    old = tmp / "incumbent.toml"
    old.write_text(text.replace('name = "smollm2-135m-ngram"', 'name = "smollm2-old"'))
    return cand, old


def test_incumbent_found_changed_same_and_absent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV, str(tmp_path / "house"))
    cand, old = _files(tmp_path)
    loaded = load_candidate(cand)
    assert find_incumbent(loaded)[1]["status"] == "first"  # no table beside it, none at home
    _table(tmp_path / "aliases.toml", old)
    inc, info = find_incumbent(loaded)
    assert info["status"] == "found" and inc is not None and inc.candidate.name == "smollm2-old"
    _table(tmp_path / "aliases.toml", old, sha="f" * 64)
    inc, info = find_incumbent(loaded)
    assert inc is None and info["status"] == "unusable" and "qualified as ffff" in info["why"]
    _table(tmp_path / "aliases.toml", cand)
    assert find_incumbent(loaded)[1]["status"] == "same"


def test_the_incumbent_is_read_from_the_house_the_run_was_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no table beside the candidate, the given house's table is read, not the current
    directory's nor $QUALIFY_HOUSE's."""
    monkeypatch.setenv(ENV, str(tmp_path / "elsewhere"))
    cand, old = _files(tmp_path)
    loaded = load_candidate(cand)
    house = tmp_path / "house"
    house.mkdir()
    _table(house / "aliases.toml", old)
    inc, info = find_incumbent(loaded, house)
    assert inc is not None and inc.candidate.name == "smollm2-old"
    assert info["status"] == "found" and info["table"] == str(house / "aliases.toml")
    assert find_incumbent(loaded)[1]["status"] == "first"  # $QUALIFY_HOUSE holds no table


def _cell(agg: list[float]) -> RunValues:
    return RunValues(aggregate_output_tok_s=agg, decode_tok_s_p50=[50.0, 50.0, 50.0])


def test_compare_gives_delta_and_interval_per_cell_and_metric() -> None:
    rows = compare({"256-c1": _cell([90.0, 91.0, 89.0])}, {"256-c1": _cell([100.0, 101.0, 99.0])})
    agg = next(r for r in rows if r.metric == "aggregate_output_tok_s")
    assert agg.delta_pct == -10.0 and agg.runs == [3, 3]
    lo, hi = agg.delta_pct_ci95
    assert lo <= -10.0 <= hi and hi < 0
    dec = next(r for r in rows if r.metric == "decode_tok_s_p50")
    assert dec.delta_pct == 0.0
    assert compare({"256-c1": _cell([1.0])}, {"512-c1": _cell([1.0])}) == []


def _client(routes: dict[str, Any]) -> Client:
    def handler(request: httpx.Request) -> httpx.Response:
        body = routes.get(request.url.path)
        if body is None:
            return httpx.Response(404, json={"error": "no"})
        if isinstance(body, str):
            return httpx.Response(200, text=body)
        return httpx.Response(200, json=body)

    return Client("http://fake", transport=httpx.MockTransport(handler))


def _read(engine: str, routes: dict[str, Any], log: str = "") -> Engine:
    async def go() -> Engine:
        client = _client(routes)
        try:
            return await engine_capacity(engine, client, lambda _l, _e: [], log)
        finally:
            await client.aclose()

    return asyncio.run(go())


def test_llamacpp_capacity_from_props_and_slots() -> None:
    props = {"default_generation_settings": {"n_ctx": 4096}, "total_slots": 2}
    got = _read("llama.cpp", {"/props": props, "/slots": [{"id": 0}, {"id": 1}]})
    assert got.kv_tokens == 8192 and got.max_concurrency_at_full_context == 2.0
    assert got.reported and got.slots == 2


def test_vllm_capacity_from_the_startup_log() -> None:
    log = (
        "INFO GPU KV cache size: 1,894,867 tokens\n"
        "INFO Maximum concurrency for 1,048,576 tokens per request: 1.81x\n"
    )
    models = {"data": [{"id": "m", "max_model_len": 1048576}]}
    got = _read("vllm", {"/v1/models": models, "/metrics": ""}, log)
    assert got.kv_tokens == 1894867 and got.max_concurrency_at_full_context == 1.81
    derived = _read("vllm", {"/v1/models": models}, "GPU KV cache size: 2,097,152 tokens")
    assert derived.max_concurrency_at_full_context == 2.0
    assert "max_model_len" in str(derived.max_concurrency_source)
    assert not _read("vllm", {"/v1/models": models}).reported


def test_sglang_capacity_from_the_gauge() -> None:
    metrics = (
        "# TYPE sglang:max_total_num_tokens gauge\n"
        'sglang:max_total_num_tokens{tp_rank="0"} 262144\n'
    )
    models = {"data": [{"id": "m", "max_model_len": 131072}]}
    got = _read("sglang", {"/metrics": metrics, "/v1/models": models})
    assert got.kv_tokens == 262144 and got.max_concurrency_at_full_context == 2.0
    info = {"internal_states": [{"max_total_num_tokens": 131072}]}
    got = _read("sglang", {"/server_info": info, "/v1/models": models})
    assert got.kv_tokens == 131072 and str(got.kv_tokens_source).startswith("/server_info")


def _recorded_metrics() -> str:
    """`/metrics` of the real vLLM 0.26.0 of the H200 kit, idle (tests/fixtures, recorded)."""
    path = Path(__file__).parents[2] / "fixtures/engines/vllm/recorded/vllm-0.26.0-h200-record.json"
    body = json.loads(path.read_text())["metrics-idle-8000"]["body"]
    assert isinstance(body, str) and "vllm:cache_config_info" in body
    return body


def test_vllm_capacity_attached_from_cache_config_info() -> None:
    """An attached vLLM has no startup log: its KV size and concurrency come from the labels of
    `vllm:cache_config_info` (vLLM 0.26.0's own page: 1,593,200 tokens, 194.48 at 8,192)."""
    models = {"data": [{"id": "m", "max_model_len": 8192}]}
    got = _read("vllm", {"/v1/models": models, "/metrics": _recorded_metrics()})
    assert got.reported and got.kv_tokens == 1593200
    assert got.max_concurrency_at_full_context == 194.482421875
    assert "kv_cache_size_tokens" in str(got.kv_tokens_source)
    older = (
        'vllm:cache_config_info{block_size="16",num_gpu_blocks="1000",'
        'kv_cache_size_tokens="None"} 1.0\n'
    )
    derived = _read("vllm", {"/v1/models": models, "/metrics": older})
    assert derived.kv_tokens == 16000 and derived.max_concurrency_at_full_context == 16000 / 8192
    assert "num_gpu_blocks" in str(derived.kv_tokens_source)
    logged = _read(
        "vllm", {"/v1/models": models, "/metrics": older}, "GPU KV cache size: 2,000 tokens"
    )
    assert logged.kv_tokens == 2000, "a launched server's own log comes first"
