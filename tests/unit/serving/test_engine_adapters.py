"""Each engine adapter method against the recorded fixtures in tests/fixtures/engines/."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from qualify.ab.acceptance import SpecCounters
from qualify.ab.kv import from_log, lane_kv
from qualify.httpclient.chat import REASONING_FIELDS, from_response
from qualify.httpclient.client import Exchange
from qualify.serving.dialects import MetricsSnapshot, busy
from qualify.serving.engine import ADAPTERS, adapter

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "engines"


def page(engine: str, *names: str) -> str:
    return "".join((FIX / engine / n).read_text() for n in names)


def body(engine: str, name: str) -> Any:
    return json.loads((FIX / engine / name).read_text())


def sse(engine: str, name: str) -> list[dict[str, Any]]:
    lines = (FIX / engine / name).read_text().splitlines()
    data = [ln[len("data: ") :] for ln in lines if ln.startswith("data: ")]
    return [json.loads(d) for d in data if d != "[DONE]"]


def two_ranks(text: str, label: str, second: str) -> str:
    """The page as two ranks report it: every labelled sample again with `label` = `second`."""
    extra = [
        re.sub(rf'{label}="[^"]*"', f'{label}="{second}"', ln)
        for ln in text.splitlines()
        if f'{label}="' in ln and not ln.startswith("#")
    ]
    return text + "\n".join(extra) + "\n"


# --- metrics ----------------------------------------------------------------------------------


def test_vllm_created_families_are_not_values() -> None:
    snap = MetricsSnapshot.parse(page("vllm", "metrics.prom"))
    assert snap.has("vllm:prefix_cache_queries_total")
    assert not any(n.endswith("_created") for n in snap.samples)


def test_sglang_gauges_sum_over_ranks_but_last_batch_values_average() -> None:
    text = page("sglang", "metrics.prom", "metrics_spec.prom")
    text = text.replace(
        'sglang:num_queue_reqs{engine_type="unified",model_name="meta-llama/Llama-3.1-8B-Instruct",'
        'moe_ep_rank="0",pp_rank="0",tp_rank="0"} 0.0',
        'sglang:num_queue_reqs{engine_type="unified",model_name="meta-llama/Llama-3.1-8B-Instruct",'
        'moe_ep_rank="0",pp_rank="0",tp_rank="0"} 3.0',
    )
    snap = MetricsSnapshot.parse(two_ranks(text, "tp_rank", "1"))
    d = adapter("sglang").metrics
    assert busy(snap, d) == (0.0, 6.0)
    assert d.read(snap, "sglang:spec_num_draft_tokens") == 4.0  # not 8: a per-batch value
    assert d.read(snap, "sglang:max_total_num_tokens") == 2 * 161721.0


def test_sglang_spec_reads_verify_calls_generated_and_width() -> None:
    d = adapter("sglang").metrics
    on = SpecCounters.read(
        MetricsSnapshot.parse(page("sglang", "metrics.prom", "metrics_spec.prom")), d
    )
    assert (on.verify_calls, on.generated, on.drafts) == (0.0, 8.0, None)
    assert on.gauges["sglang:spec_num_draft_tokens"] == 4.0
    off = SpecCounters.read(MetricsSnapshot.parse(page("sglang", "metrics.prom")), d)
    assert off.verify_calls is None and off.gauges == {}
    assert d.spec_missing == "spec-gauges-absent"
    assert adapter("vllm").metrics.spec_missing == "spec-counters-absent"


def test_spec_names_list_what_each_engine_is_read_from() -> None:
    assert "sglang:spec_verify_calls_total" in adapter("sglang").metrics.spec_names()
    assert "sglang:generation_tokens_total" in adapter("sglang").metrics.spec_names()
    assert "vllm:spec_decode_num_draft_tokens_total" in adapter("vllm").metrics.spec_names()
    assert not any(n.startswith("vllm:") for n in adapter("sglang").metrics.spec_names())


def test_kv_capacity_from_gauge_and_log() -> None:
    sg = MetricsSnapshot.parse(page("sglang", "metrics.prom"))
    got = lane_kv("sglang", adapter("sglang").metrics, sg, "")
    assert got.gauges["sglang:max_total_num_tokens"] == 161721.0 and got.reported
    assert adapter("sglang").kv_report == "pool-gauge"
    log = (
        "INFO GPU KV cache size: 1,234,560 tokens\n"
        "Maximum concurrency for 8,192 tokens per request: 150.70x"
    )
    assert from_log(log, "vllm") == {"kv_tokens": 1234560, "max_concurrency": 150.7}
    assert from_log(log, "sglang") == {}


# --- errors -----------------------------------------------------------------------------------


def test_vllm_older_flat_overrequest_is_read_too() -> None:
    flat = {
        "object": "error",
        "message": "This model's maximum context length is 16384 tokens. However, you requested "
        "19591 tokens (9591 in the messages, 10000 in the completion).",
        "type": "BadRequestError",
        "param": None,
        "code": 400,
    }
    err = adapter("vllm").quirks.error(flat)
    assert err is not None
    assert (err.shape, err.kind, err.limit, err.prompt_tokens) == (
        "flat",
        "over-request",
        16384,
        9591,
    )


def test_sglang_overlength_and_overrequest_are_flat() -> None:
    a = adapter("sglang")
    over = a.quirks.error(body("sglang", "error_overlength.json"))
    req = a.quirks.error(body("sglang", "error_overrequest.json"))
    assert over is not None and req is not None
    assert (over.shape, over.kind, over.limit, over.prompt_tokens) == (
        "flat",
        "over-length",
        40960,
        61709,
    )
    assert (req.kind, req.limit, req.prompt_tokens) == ("over-request", 16384, 13)
    nested = adapter("vllm").quirks.error({"error": {"message": "no", "type": "BadRequest"}})
    assert nested is not None and nested.shape == "nested"


def test_the_client_reads_an_error_with_the_quirks_it_is_given() -> None:
    """The engine's wording reaches the chat reader as data: with SGLang's quirks the 400 is an
    over-length; with none, the same body is only a message."""
    ex = Exchange("POST", "http://x/v1/chat/completions", {}, {}, status=400)
    ex.body = body("sglang", "error_overlength.json")
    read = from_response(ex, adapter("sglang").quirks)
    assert read.server_error is not None and read.server_error.kind == "over-length"
    assert (read.server_error.limit, read.server_error.prompt_tokens) == (40960, 61709)
    plain = from_response(ex)
    assert plain.server_error is not None and plain.server_error.kind is None
    assert plain.error == read.error


def test_llamacpp_overlength_reads_its_fields() -> None:
    err = adapter("llama.cpp").quirks.error(
        {
            "error": {
                "code": 400,
                "message": "request (9000 tokens) exceeds the available context size (8192 "
                "tokens), try increasing it",
                "type": "exceed_context_size_error",
                "n_prompt_tokens": 9000,
                "n_ctx": 8192,
            }
        }
    )
    assert err is not None and (err.kind, err.limit, err.prompt_tokens) == (
        "over-length",
        8192,
        9000,
    )


def test_other_errors_and_answers_are_not_overlength() -> None:
    assert adapter("vllm").quirks.error(body("vllm", "chat_completion.json")) is None
    other = adapter("sglang").quirks.error({"object": "error", "message": "model not found"})
    assert other is not None and other.kind is None and other.limit is None


# --- reasoning --------------------------------------------------------------------------------


def _reasoning(engine: str) -> str:
    a = adapter(engine)
    return "".join(
        a.quirks.reasoning(c["choices"][0]["delta"])
        for c in sse(engine, "chat_stream_reasoning.sse")
        if c["choices"]
    )


def test_reasoning_field_per_engine() -> None:
    assert _reasoning("vllm").startswith("To find")  # `reasoning` only (0.26.0, recorded)
    assert _reasoning("sglang").startswith("2=")  # `reasoning_content`; `reasoning` absent
    assert adapter("vllm").quirks.reasoning({"reasoning_content": "x"}) == "x"  # 0.11-era builds
    assert adapter("sglang").quirks.reasoning({"reasoning": "x"}) == ""
    assert set(REASONING_FIELDS) == {
        f for a in ADAPTERS.values() for f in a.quirks.reasoning_fields
    }


# --- sizing, window, identity -----------------------------------------------------------------


def test_sizing_and_window_per_engine() -> None:
    assert adapter("llama.cpp").sizing == "apply-template+tokenize"
    assert adapter("vllm").sizing == adapter("sglang").sizing == "tokenize"
    assert adapter("llama.cpp").context_per_slot
    assert not adapter("vllm").context_per_slot and not adapter("sglang").context_per_slot


def test_sglang_identity_from_server_info() -> None:
    a = adapter("sglang")
    info = body("sglang", "server_info.json")
    seen, why = a.observe({"/v1/models": body("sglang", "models.json"), "/server_info": info}, None)
    assert seen["engine"].value == "sglang" and seen["engine_build"].value == "0.5.23"
    assert seen["parallelism"].value["tensor"] == 2
    assert seen["speculation"].value == {"method": "none", "draft_tokens": 0, "draft_model": None}
    assert "max_running_requests" in why["max_num_seqs"]
    info |= {"speculative_algorithm": "EAGLE", "speculative_num_draft_tokens": 4}
    seen, _ = a.observe({"/v1/models": body("sglang", "models.json"), "/server_info": info}, None)
    spec = seen["speculation"].value
    assert a.same("speculation", {"method": "mtp", "draft_tokens": 3}, spec)[0] is True
    assert a.same("speculation", {"method": "eagle", "draft_tokens": 4}, spec)[0] is False
