"""Probe a running SGLang server (scripts/gpu/sglang.sh probe): print a short account of each call
and keep every exchange (request, status, headers, body) in /tmp/sgk/ev/recorded-sglang-PORT.json.

usage: python3 scripts/gpu/sglang_probe.py PORT
"""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.error
import urllib.request

PORT = int(sys.argv[1]) if len(sys.argv) > 1 else 30000
BASE = f"http://127.0.0.1:{PORT}"
MODEL = "SmolLM2-135M-Instruct"
RECORD = os.path.join(os.environ.get("SGK_EV", "/tmp/sgk/ev"), f"recorded-sglang-{PORT}.json")
records: list[dict] = []


def call(
    method: str, path: str, body: dict | None = None, stream: bool = False, timeout: float = 60
):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(
        BASE + path, data=data, method=method, headers={"content-type": "application/json"}
    )
    t = time.time()
    headers: dict[str, str] = {}
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            text, status, headers = r.read().decode(), r.status, dict(r.headers)
    except urllib.error.HTTPError as e:
        text, status, headers = e.read().decode(), e.code, dict(e.headers)
    except Exception as e:
        text, status = repr(e), None
    took = time.time() - t
    records.append(
        {
            "method": method,
            "path": path,
            "request": body,
            "status": status,
            "seconds": round(took, 3),
            "headers": headers,
            "body": text,
        }
    )
    print(f"== {method} {path} status={status} {took:.2f}s", flush=True)
    if stream:
        lines = [ln for ln in text.splitlines() if ln.startswith("data:")]
        print(f"   {len(lines)} data lines; first 3 and last 3:")
        for ln in [*lines[:3], "...", *lines[-3:]]:
            print("   " + ln[:400])
    else:
        print("   " + text[:1500].replace("\n", "\n   "))
    return text


def ask(content: str) -> list[dict]:
    return [{"role": "user", "content": content}]


def main() -> None:
    for p in ("/health", "/v1/models", "/model_info"):
        call("GET", p)
    info = call("GET", "/server_info")
    try:
        s = json.loads(info)
        keys = (
            "version",
            "speculative_algorithm",
            "speculative_num_draft_tokens",
            "attention_backend",
            "sampling_backend",
            "context_length",
            "max_running_requests",
            "kv_cache_dtype",
            "quantization",
            "tp_size",
            "mem_fraction_static",
            "max_total_num_tokens",
        )
        print("   server_info:", json.dumps({k: s.get(k) for k in keys}))
    except Exception:
        pass
    q = "What is the capital of France? Answer in one sentence."
    call(
        "POST",
        "/v1/tokenize",
        {"model": MODEL, "messages": ask(q), "chat_template_kwargs": {"enable_thinking": False}},
    )
    call(
        "POST",
        "/v1/chat/completions",
        {
            "model": MODEL,
            "messages": ask(q),
            "temperature": 0,
            "max_tokens": 64,
            "reasoning_effort": "none",
        },
    )
    call(
        "POST",
        "/v1/chat/completions",
        {
            "model": MODEL,
            "messages": ask("Count from 1 to 20, one number a line."),
            "temperature": 0,
            "max_tokens": 96,
            "stream": True,
            "stream_options": {"include_usage": True},
            "chat_template_kwargs": {"enable_thinking": True},
        },
        stream=True,
    )
    tools = [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Current weather for a city",
                "parameters": {
                    "type": "object",
                    "properties": {"city": {"type": "string"}},
                    "required": ["city"],
                },
            },
        }
    ]
    call(
        "POST",
        "/v1/chat/completions",
        {
            "model": MODEL,
            "messages": ask("What is the weather in Paris?"),
            "temperature": 0,
            "max_tokens": 96,
            "reasoning_effort": "none",
            "tool_choice": "required",
            "tools": tools,
        },
    )
    call(
        "POST",
        "/v1/chat/completions",
        {
            "model": MODEL,
            "messages": ask("What is the weather in Paris?"),
            "temperature": 0,
            "max_tokens": 96,
            "reasoning_effort": "none",
            "tool_choice": "auto",
            "tools": tools,
            "stream": True,
        },
        stream=True,
    )
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string"}, "country": {"type": "string"}},
        "required": ["city", "country"],
        "additionalProperties": False,
    }
    call(
        "POST",
        "/v1/chat/completions",
        {
            "model": MODEL,
            "messages": ask("Give a city and its country as JSON."),
            "temperature": 0,
            "max_tokens": 64,
            "reasoning_effort": "none",
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "place", "strict": True, "schema": schema},
            },
        },
    )
    # a repetitive completion, so that NGRAM has something to draft from; spec details asked for
    call(
        "POST",
        "/v1/chat/completions",
        {
            "model": MODEL,
            "messages": ask(
                "Repeat the line 'the quick brown fox jumps over the lazy dog' ten times."
            ),
            "temperature": 0,
            "max_tokens": 160,
            "reasoning_effort": "none",
            "return_spec_tokens_details": True,
        },
    )
    call(
        "POST",
        "/v1/chat/completions",
        {"model": MODEL, "messages": ask("x " * 9000), "max_tokens": 8},
    )
    call("POST", "/v1/chat/completions", {"model": MODEL, "messages": ask(q), "max_tokens": 9000})
    m = call("GET", "/metrics", timeout=20)
    names = sorted(
        {ln.split("{")[0].split(" ")[0] for ln in m.splitlines() if ln.startswith("sglang:")}
    )
    print("== sglang:* metric names\n   " + " ".join(names))
    for ln in m.splitlines():
        if ln.startswith(
            (
                "sglang:spec_",
                "sglang:num_running_reqs",
                "sglang:max_total_num_tokens",
                "sglang:generation_tokens_total",
                "sglang:gen_throughput",
            )
        ):
            print("   " + ln[:300])
    os.makedirs(os.path.dirname(RECORD), exist_ok=True)
    with open(RECORD, "w") as f:
        json.dump(
            {
                "base_url": BASE,
                "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "exchanges": records,
            },
            f,
            indent=1,
        )
    print(f"== recorded {len(records)} exchanges in {RECORD}")


if __name__ == "__main__":
    main()
