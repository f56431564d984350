"""The replay serves what the vLLM and SGLang recordings show, over real HTTP on loopback."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from replay.server import Profile, Replay, Spec, sglang_profile, vllm_011_profile, vllm_profile

Start = Callable[[Profile], Replay]


def sse(r: httpx.Response) -> list[tuple[str | None, Any]]:
    out: list[tuple[str | None, Any]] = []
    for block in r.text.split("\n\n"):
        name = None
        for line in block.splitlines():
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                data = line[6:]
                out.append((name, data if data == "[DONE]" else json.loads(data)))
    return out


def chat(base: str, text: str = "What is two plus two?", **kw: Any) -> httpx.Response:
    payload = {"model": "m", "messages": [{"role": "user", "content": text}]} | kw
    return httpx.post(f"{base}/v1/chat/completions", json=payload, timeout=10)


def metrics(base: str) -> dict[str, float]:
    """Each sample summed over its label sets, parsed by prometheus_client (so it must be valid)."""
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(httpx.get(f"{base}/metrics").text):
        for s in family.samples:
            key = s.name + (f"@{s.labels['position']}" if "position" in s.labels else "")
            out[key] = out.get(key, 0.0) + s.value
    return out


def test_vllm_models_version_and_tokenize(replay: Replay) -> None:
    models = httpx.get(f"{replay.base_url}/v1/models").json()
    card = models["data"][0]
    assert (card["id"], card["owned_by"], card["max_model_len"]) == (
        "deepseek-v4-flash",
        "vllm",
        8192,
    )
    assert "permission" in card
    assert httpx.get(f"{replay.base_url}/version").json() == {"version": "0.26.0"}
    assert httpx.get(f"{replay.base_url}/server_info").status_code == 404
    tok = httpx.post(f"{replay.base_url}/tokenize", json={"prompt": "a b  c\nd"}).json()
    assert (tok["count"], tok["max_model_len"], len(tok["tokens"]), tok["token_strs"]) == (
        4,
        8192,
        4,
        None,
    )
    msgs = {"messages": [{"role": "user", "content": "one two"}]}
    assert httpx.post(f"{replay.base_url}/tokenize", json=msgs).json()["count"] == 2 + 4


def test_sglang_models_server_info_and_tokenize(replay_factory: Start) -> None:
    r = replay_factory(sglang_profile(spec=Spec(3, (0.8, 0.5, 0.2))))
    card = httpx.get(f"{r.base_url}/v1/models").json()["data"][0]
    assert (card["owned_by"], card["max_model_len"], card["root"]) == ("sglang", 8192, card["id"])
    assert "permission" not in card
    assert httpx.get(f"{r.base_url}/version").status_code == 404
    for path in ("/server_info", "/get_server_info"):
        info = httpx.get(f"{r.base_url}{path}").json()
        assert (
            info["version"],
            info["speculative_num_steps"],
            info["speculative_num_draft_tokens"],
        ) == (
            "0.5.23",
            3,
            4,
        )
    assert httpx.get(f"{r.base_url}/model_info").json()["max_context_length"] == 8192
    tok = httpx.post(f"{r.base_url}/v1/tokenize", json={"prompt": "x y z"}).json()
    assert set(tok) == {"tokens", "count", "max_model_len"} and tok["count"] == 3


def test_vllm_stream_puts_reasoning_in_reasoning_only(replay: Replay) -> None:
    events = sse(chat(replay.base_url, stream=True, stream_options={"include_usage": True}))
    chunks = [d for _, d in events if d != "[DONE]"]
    assert events[-1][1] == "[DONE]"
    assert (
        chunks[0]["id"].startswith("chatcmpl-")
        and chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    )
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    reasoning = "".join(d.get("reasoning") or "" for d in deltas)
    content = "".join(d.get("content") or "" for d in deltas)
    assert reasoning == "The user wants a short answer, so I will give one."
    assert content == "The answer is 4."
    assert not any("reasoning_content" in d for d in deltas)
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
    usage = chunks[-1]["usage"]
    assert chunks[-1]["choices"] == [] and usage["completion_tokens"] == 15
    assert usage["prompt_tokens"] == 5 + 4


def test_vllm_011_stream_carries_both_reasoning_names(replay_factory: Start) -> None:
    r = replay_factory(vllm_011_profile())
    deltas = [
        d["choices"][0]["delta"] for _, d in sse(chat(r.base_url, stream=True)) if d != "[DONE]"
    ]
    first = next(d for d in deltas if d.get("reasoning"))
    assert first["reasoning"] == first["reasoning_content"]
    assert all(d["reasoning_content"] is None for d in deltas if d.get("content"))


def test_sglang_stream_uses_reasoning_content_and_null_keys(replay_factory: Start) -> None:
    r = replay_factory(sglang_profile())
    chunks = [d for _, d in sse(chat(r.base_url, stream=True)) if d != "[DONE]"]
    assert not chunks[0]["id"].startswith("chatcmpl-")
    deltas = [c["choices"][0]["delta"] for c in chunks]
    assert all(set(d) == {"role", "content", "reasoning_content", "tool_calls"} for d in deltas)
    assert "".join(d["reasoning_content"] or "" for d in deltas).startswith("The user wants")
    assert "".join(d["content"] or "" for d in deltas) == "The answer is 4."
    assert (
        chunks[-1]["choices"][0]["finish_reason"] == "stop"
        and "matched_stop" in chunks[-1]["choices"][0]
    )


@pytest.mark.parametrize("make", [vllm_profile, sglang_profile])
def test_reasoning_split_off_sends_thinking_in_content(replay_factory: Start, make: Any) -> None:
    r = replay_factory(make(reasoning_split=False))
    deltas = [
        d["choices"][0]["delta"] for _, d in sse(chat(r.base_url, stream=True)) if d != "[DONE]"
    ]
    assert not any(d.get("reasoning") or d.get("reasoning_content") for d in deltas)
    assert "".join(d.get("content") or "" for d in deltas).startswith("<think>")


def test_non_streamed_chat_messages(replay_factory: Start) -> None:
    v = chat(replay_factory(vllm_profile()).base_url).json()
    msg = v["choices"][0]["message"]
    assert msg["reasoning"].startswith("The user") and "reasoning_content" not in msg
    s = chat(replay_factory(sglang_profile()).base_url, max_tokens=3).json()
    assert s["choices"][0]["finish_reason"] == "length" and s["usage"]["completion_tokens"] == 3
    assert s["choices"][0]["message"]["reasoning_content"] == "The user wants"


@pytest.mark.parametrize(
    ("make", "prefix"), [(vllm_profile, "chatcmpl-tool-"), (sglang_profile, "call_")]
)
def test_tool_call_deltas(replay_factory: Start, make: Any, prefix: str) -> None:
    r = replay_factory(make())
    tool = {
        "type": "function",
        "function": {"name": "get_weather", "parameters": {"required": ["city"]}},
    }
    chunks = [d for _, d in sse(chat(r.base_url, stream=True, tools=[tool])) if d != "[DONE]"]
    calls = [
        c["choices"][0]["delta"]["tool_calls"][0]
        for c in chunks
        if c["choices"][0]["delta"].get("tool_calls")
    ]
    assert calls[0]["id"].startswith(prefix) and calls[0]["function"]["name"] == "get_weather"
    args = "".join(c["function"].get("arguments") or "" for c in calls)
    assert json.loads(args) == {"city": "Paris"}
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"


def test_vllm_auto_tool_choice_without_parser_is_400(replay_factory: Start) -> None:
    r = replay_factory(vllm_profile(tool_parser=False))
    tool = {"type": "function", "function": {"name": "f", "parameters": {}}}
    resp = chat(r.base_url, tools=[tool])
    assert (
        resp.status_code == 400 and "--enable-auto-tool-choice" in resp.json()["error"]["message"]
    )


@pytest.mark.parametrize("make", [vllm_profile, sglang_profile])
def test_responses_stream_and_body(replay_factory: Start, make: Any) -> None:
    r = replay_factory(make())
    url = f"{r.base_url}/v1/responses"
    events = sse(
        httpx.post(url, json={"model": "m", "input": "hi there", "stream": True}, timeout=10)
    )
    types = [name for name, _ in events]
    assert types[:3] == ["response.created", "response.in_progress", "response.output_item.added"]
    assert types[-1] == "response.completed" and "response.reasoning_text.delta" in types
    assert [d["sequence_number"] for _, d in events] == list(range(len(events)))
    text = "".join(d["delta"] for n, d in events if n == "response.output_text.delta")
    assert text == "The answer is 4."
    done = events[-1][1]["response"]
    assert [i["type"] for i in done["output"]] == ["reasoning", "message"]
    assert (
        done["usage"]["input_tokens"] == 2 + 4
        and done["usage"]["output_tokens_details"]["reasoning_tokens"] == 11
    )
    plain = httpx.post(
        url, json={"model": "m", "input": [{"role": "user", "content": "hi"}]}
    ).json()
    assert (
        plain["object"] == "response"
        and plain["output"][1]["content"][0]["text"] == "The answer is 4."
    )


def test_vllm_metrics_without_spec_have_no_spec_families(replay: Replay) -> None:
    m = metrics(replay.base_url)
    assert not any(k.startswith("vllm:spec_decode") for k in m)
    assert m["vllm:num_requests_running"] == 0 and m["vllm:kv_cache_usage_perc"] == 0


def test_vllm_counters_advance_per_request(replay_factory: Start) -> None:
    r = replay_factory(vllm_profile(spec=Spec(2, (0.7, 0.4))))
    before = metrics(r.base_url)
    chat(r.base_url, "a b c", max_tokens=100)
    chat(r.base_url, "a b d", max_tokens=100)
    after = metrics(r.base_url)

    def d(k: str) -> float:
        return after[k] - before[k]

    assert d("vllm:prompt_tokens_total") == 2 * (3 + 4)
    assert d("vllm:generation_tokens_total") == 2 * 15
    assert d("vllm:request_success_total") == 2
    assert d("vllm:prefix_cache_queries_total") == 14 and d("vllm:prefix_cache_hits_total") == 4 + 2
    # 15 tokens at 1 + 1.1 per step: 8 steps; positions accepted round(8 * p): 6 and 3
    assert (
        d("vllm:spec_decode_num_drafts_total"),
        d("vllm:spec_decode_num_draft_tokens_total"),
    ) == (16, 32)
    assert d("vllm:spec_decode_num_accepted_tokens_total") == 18
    assert (
        d("vllm:spec_decode_num_accepted_tokens_per_pos_total@0"),
        d("vllm:spec_decode_num_accepted_tokens_per_pos_total@1"),
    ) == (12, 6)
    assert after["vllm:num_requests_running"] == 0 and after["vllm:num_requests_waiting"] == 0


def test_running_gauge_counts_a_request_in_flight(replay_factory: Start) -> None:
    r = replay_factory(vllm_profile(chunk_interval_s=0.01))
    payload = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    with httpx.stream("POST", f"{r.base_url}/v1/chat/completions", json=payload, timeout=10) as s:
        lines = s.iter_lines()
        assert next(lines).startswith("data: ")
        during = metrics(r.base_url)
        for _ in lines:
            pass
    assert during["vllm:num_requests_running"] == 1 and during["vllm:kv_cache_usage_perc"] > 0
    assert metrics(r.base_url)["vllm:num_requests_running"] == 0


def test_sglang_spec_gauges_and_counters(replay_factory: Start) -> None:
    plain = metrics(replay_factory(sglang_profile()).base_url)
    assert "sglang:spec_accept_length" not in plain
    r = replay_factory(sglang_profile(spec=Spec(3, (0.8, 0.5, 0.2))))
    before = metrics(r.base_url)
    chat(r.base_url)
    after = metrics(r.base_url)
    # 15 tokens at 1 + 1.5 per step: 6 steps; accepted round(6 * p) = 5, 3, 1 -> 9 / 6 per step
    assert after["sglang:spec_accept_length"] == pytest.approx(1 + 9 / 6)
    assert after["sglang:spec_accept_rate"] == pytest.approx(9 / 6 / 3)
    assert after["sglang:spec_verify_calls_total"] - before["sglang:spec_verify_calls_total"] == 6
    assert after["sglang:generation_tokens_total"] - before["sglang:generation_tokens_total"] == 15
    assert after["sglang:num_running_reqs"] == 0 and after["sglang:num_queue_reqs"] == 0


def test_vllm_over_length_400s_as_recorded_on_026(replay_factory: Start) -> None:
    """vLLM 0.26.0 (recorded): prompt + max_tokens over the window is a 400 naming "at least"
    the prompt that fills the window, on chat and Responses alike; max_tokens over the window
    is its own 400."""
    r = replay_factory(vllm_profile(max_model_len=20))
    over = chat(r.base_url, " ".join(["w"] * 17))  # 17 + 4 = 21 > 20
    err = over.json()["error"]
    assert over.status_code == 400 and (err["type"], err["param"], err["code"]) == (
        "BadRequestError",
        "input_tokens",
        400,
    )
    assert (
        "maximum context length is 20 tokens" in err["message"]
        and "your prompt contains at least 20 input tokens" in err["message"]
    )
    fits = chat(r.base_url, " ".join(["w"] * 6), max_tokens=10)  # 10 + 10 = 20
    assert fits.status_code == 200
    cut = chat(r.base_url, " ".join(["w"] * 16), max_tokens=10)  # 20 + 10 > 20: rejected
    assert cut.status_code == 400 and "at least 11 input tokens" in cut.json()["error"]["message"]
    big = chat(r.base_url, "w", max_tokens=21)
    assert big.status_code == 400 and big.json()["error"]["param"] == "max_tokens"
    resp = httpx.post(
        f"{r.base_url}/v1/responses", json={"model": "m", "input": " ".join(["w"] * 16)}
    )
    assert resp.status_code == 400 and resp.json()["error"]["param"] == "input_tokens"


def test_sglang_over_length_400s(replay_factory: Start) -> None:
    r = replay_factory(sglang_profile(max_model_len=20))
    over = chat(r.base_url, " ".join(["w"] * 16))  # 16 + 4 = 20 >= 20
    assert over.status_code == 400
    body = over.json()
    assert (body["object"], body["type"], body["param"], body["code"]) == (
        "error",
        "BadRequestError",
        None,
        400,
    )
    assert (
        body["message"]
        == "The input (20 tokens) is longer than the model's context length (20 tokens)."
    )
    req = chat(r.base_url, "w", max_tokens=16)
    assert req.status_code == 400 and req.json()["message"].startswith(
        "Requested token count exceeds"
    )
    assert chat(r.base_url, "w", max_tokens=15).status_code == 200
