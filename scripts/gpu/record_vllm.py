#!/usr/bin/env python3
"""Record real answers of running vLLM servers: request, status, headers and raw body of each.

    python3 scripts/gpu/record_vllm.py OUT.json [PORT ...]

The first port is the candidate's server (speculative decoding on, `VLLM_SERVER_DEV_MODE=1`),
the others are read for their reports only. The output has one entry per call, in the form of
the recordings `scripts/gpu/vllm_fixtures.py` turns into tests/fixtures/engines/vllm/. Standard
library only: it runs on the GPU machine before anything is installed.
"""

from __future__ import annotations

import json
import sys
import time
import urllib.error
import urllib.request
from typing import Any

MODEL = "SmolLM2-135M-Instruct"
OUT: dict[str, Any] = {}


def call(
    key: str, port: int, method: str, path: str, body: Any = None, timeout: float = 120
) -> str:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}",
        data=data,
        method=method,
        headers={"content-type": "application/json"},
    )
    t0 = time.time()
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            status, headers, text = r.status, dict(r.headers), r.read().decode()
    except urllib.error.HTTPError as e:
        status, headers, text = e.code, dict(e.headers), e.read().decode()
    except Exception as e:
        status, headers, text = None, {}, repr(e)
    OUT[key] = {
        "request": {"method": method, "path": path, "port": port, "body": body},
        "status": status,
        "headers": {k.lower(): v for k, v in headers.items()},
        "body": text,
        "seconds": round(time.time() - t0, 3),
    }
    print(f"{key}: {method} {path} -> {status} ({len(text)} chars)", flush=True)
    return text


def ask(content: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": content}]


TOOLS = [
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
LONG = " ".join(f"The ferry counted {i * 7 + 3} lanterns near the harbour." for i in range(1600))


def main() -> None:
    out_path = sys.argv[1]
    ports = [int(p) for p in sys.argv[2:]] or [8000]
    cand = ports[0]
    for p in ports:
        call(f"version-{p}", p, "GET", "/version")
        call(f"models-{p}", p, "GET", "/v1/models")
        call(f"server_info-{p}", p, "GET", "/server_info")
        call(f"server_info_json-{p}", p, "GET", "/server_info?config_format=json")
        call(f"metrics-idle-{p}", p, "GET", "/metrics")
    c = cand
    call(
        "chat-think",
        c,
        "POST",
        "/v1/chat/completions",
        {
            "model": MODEL,
            "messages": ask("What is the capital of France?"),
            "max_tokens": 48,
            "temperature": 0,
            "chat_template_kwargs": {"enable_thinking": True},
        },
    )
    call(
        "chat-effort-none",
        c,
        "POST",
        "/v1/chat/completions",
        {
            "model": MODEL,
            "messages": ask("What is the capital of France?"),
            "max_tokens": 48,
            "temperature": 0,
            "reasoning_effort": "none",
        },
    )
    call(
        "chat-stream-think",
        c,
        "POST",
        "/v1/chat/completions",
        {
            "model": MODEL,
            "messages": ask("Count from 1 to 5."),
            "max_tokens": 32,
            "temperature": 0,
            "stream": True,
            "stream_options": {"include_usage": True},
            "chat_template_kwargs": {"enable_thinking": True},
        },
    )
    call(
        "chat-stream-effort-none",
        c,
        "POST",
        "/v1/chat/completions",
        {
            "model": MODEL,
            "messages": ask("Count from 1 to 5."),
            "max_tokens": 32,
            "temperature": 0,
            "stream": True,
            "stream_options": {"include_usage": True},
            "reasoning_effort": "none",
        },
    )
    call(
        "chat-tool-required",
        c,
        "POST",
        "/v1/chat/completions",
        {
            "model": MODEL,
            "messages": ask("What is the weather in Paris?"),
            "max_tokens": 96,
            "temperature": 0,
            "reasoning_effort": "none",
            "tools": TOOLS,
            "tool_choice": "required",
        },
    )
    call(
        "chat-stream-tool-required",
        c,
        "POST",
        "/v1/chat/completions",
        {
            "model": MODEL,
            "messages": ask("What is the weather in Paris?"),
            "max_tokens": 96,
            "temperature": 0,
            "reasoning_effort": "none",
            "tools": TOOLS,
            "tool_choice": "required",
            "stream": True,
            "stream_options": {"include_usage": True},
        },
    )
    call(
        "chat-stream-tool-auto",
        c,
        "POST",
        "/v1/chat/completions",
        {
            "model": MODEL,
            "messages": ask("What is the weather in Paris?"),
            "max_tokens": 96,
            "temperature": 0,
            "reasoning_effort": "none",
            "tools": TOOLS,
            "tool_choice": "auto",
            "stream": True,
            "stream_options": {"include_usage": True},
        },
    )
    call(
        "chat-overlength-prompt-alone",
        c,
        "POST",
        "/v1/chat/completions",
        {"model": MODEL, "messages": ask(LONG), "max_tokens": 8},
    )
    call(
        "responses-overlength-prompt-alone",
        c,
        "POST",
        "/v1/responses",
        {"model": MODEL, "input": LONG, "max_output_tokens": 8},
    )
    call(
        "chat-maxtokens-over-window",
        c,
        "POST",
        "/v1/chat/completions",
        {"model": MODEL, "messages": ask("hi"), "max_tokens": 9000},
    )
    call(
        "responses-effort-none",
        c,
        "POST",
        "/v1/responses",
        {
            "model": MODEL,
            "input": "What is the capital of France?",
            "max_output_tokens": 48,
            "temperature": 0,
            "reasoning": {"effort": "none"},
        },
    )
    call(
        "responses-stream-effort-none",
        c,
        "POST",
        "/v1/responses",
        {
            "model": MODEL,
            "input": "What is the capital of France?",
            "max_output_tokens": 48,
            "temperature": 0,
            "reasoning": {"effort": "none"},
            "stream": True,
        },
    )
    call(
        "responses-truncated",
        c,
        "POST",
        "/v1/responses",
        {"model": MODEL, "input": "Write a long story about a dragon.", "max_output_tokens": 8},
    )
    call(
        "responses-truncated-stream",
        c,
        "POST",
        "/v1/responses",
        {
            "model": MODEL,
            "input": "Write a long story about a dragon.",
            "max_output_tokens": 8,
            "stream": True,
        },
    )
    call("tokenize-plain", c, "POST", "/tokenize", {"model": MODEL, "messages": ask("Hello there")})
    call(
        "tokenize-thinking-false",
        c,
        "POST",
        "/tokenize",
        {
            "model": MODEL,
            "messages": ask("Hello there"),
            "chat_template_kwargs": {"enable_thinking": False},
        },
    )
    for p in ports:
        call(f"metrics-after-{p}", p, "GET", "/metrics")
    with open(out_path, "w") as f:
        json.dump(OUT, f, indent=1)


if __name__ == "__main__":
    main()
