#!/usr/bin/env python3
"""Write tests/fixtures/engines/vllm/ from the recordings of the real server, each fixture with
a `<name>.source.txt` (or `# SOURCE` header) naming the recording, the entry, the request, the
command that served it and the version.

    python3 scripts/gpu/vllm_fixtures.py

The recordings (tests/fixtures/engines/vllm/recorded/) are kept as they came back:
`vllm-0.26.0-h200-probe.json` from `.vllm-h200/vh.sh probe` plus hand calls (2026-12-03 12:10
UTC) and `vllm-0.26.0-h200-record.json` from `scripts/gpu/record_vllm.py` (2026-12-03 13:36
UTC). Bodies are written byte for byte (JSON re-indented only); nothing is edited.
"""

from __future__ import annotations

import json
from pathlib import Path

DIR = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "engines" / "vllm"
REC = DIR / "recorded"
SERVE = (
    "vLLM 0.26.0 (PyPI wheel, torch 2.11.0+cu130) on one NVIDIA H200: python3 -m "
    "vllm.entrypoints.cli.main serve /tmp/vh/smollm2-hf --served-model-name SmolLM2-135M-Instruct "
    "--dtype bfloat16 --max-model-len 8192 --max-num-seqs 8 --gpu-memory-utilization 0.25 "
    "--chat-template Qwen-Qwen3-0.6B.jinja --enable-auto-tool-choice --tool-call-parser hermes "
    "--reasoning-parser qwen3"
)
PORTS = {
    8000: SERVE + " --speculative-config "
    '\'{"method":"ngram","num_speculative_tokens":5,"prompt_lookup_max":4}\' (port 8000)',
    8001: SERVE + " (port 8001, no speculative decoding)",
}
DEV = " with VLLM_SERVER_DEV_MODE=1"
FILES = {
    "probe": ("vllm-0.26.0-h200-probe.json", ".vllm-h200/vh.sh probe and hand calls"),
    "record": ("vllm-0.26.0-h200-record.json", "scripts/gpu/record_vllm.py"),
}
# fixture name -> (recording, entry, what it is)
JSON_FIXTURES = {
    "version.json": ("record", "version-8000", "GET /version"),
    "models.json": ("record", "models-8000", "GET /v1/models"),
    "server_info.json": ("record", "server_info_json-8000", "GET /server_info (dev mode), JSON"),
    "server_info_text.json": ("record", "server_info-8000", "GET /server_info (dev mode), text"),
    "server_info_404.json": ("record", "server_info-8001", "GET /server_info without dev mode"),
    "tokenize.json": ("record", "tokenize-plain", "POST /tokenize with messages"),
    "tokenize_thinking_false.json": (
        "record",
        "tokenize-thinking-false",
        "POST /tokenize with chat_template_kwargs.enable_thinking false",
    ),
    "tokenize_effort_none.json": (
        "probe",
        "tokenize-effort-none",
        "POST /tokenize with reasoning_effort none (ignored: as plain)",
    ),
    "chat_completion.json": (
        "record",
        "chat-think",
        "chat completion at enable_thinking true: all of it parsed as reasoning",
    ),
    "chat_completion_effort_none.json": (
        "record",
        "chat-effort-none",
        "chat completion at reasoning_effort none: content only",
    ),
    "chat_tool_required.json": (
        "record",
        "chat-tool-required",
        "tool_choice required: finish_reason tool_calls with text and no tool_calls",
    ),
    "chat_json_schema.json": (
        "probe",
        "chat-json-schema-effort-none",
        "response_format json_schema at reasoning_effort none: not enforced",
    ),
    "chat_json_schema_reasoning.json": (
        "probe",
        "chat-json-schema-no-reasoning-fields",
        "response_format json_schema, no level fields: all of it parsed as reasoning",
    ),
    "error_overlength.json": (
        "record",
        "chat-overlength-prompt-alone",
        "chat with a prompt over the window (about 19k tokens, max_tokens 8)",
    ),
    "error_overrequest.json": (
        "probe",
        "chat-overlength",
        "chat whose prompt plus max_tokens 16 is over the window",
    ),
    "error_max_tokens.json": (
        "probe",
        "chat-maxtokens-over-window",
        "chat with max_tokens 9000 over the 8192 window",
    ),
    "responses_error_overlength.json": (
        "record",
        "responses-overlength-prompt-alone",
        "POST /v1/responses with an input over the window",
    ),
    "responses.json": ("record", "responses-effort-none", "POST /v1/responses, effort none"),
    "responses_incomplete.json": (
        "record",
        "responses-truncated",
        "POST /v1/responses cut by max_output_tokens 8: status incomplete",
    ),
}
SSE_FIXTURES = {
    "chat_stream_reasoning.sse": (
        "record",
        "chat-stream-think",
        "streamed chat at enable_thinking true: reasoning deltas, finish, usage",
    ),
    "chat_stream.sse": (
        "record",
        "chat-stream-effort-none",
        "streamed chat at reasoning_effort none: content deltas, finish, usage",
    ),
    "chat_stream_tool_required.sse": (
        "record",
        "chat-stream-tool-required",
        "streamed chat with tool_choice required: text, no tool-call delta",
    ),
    "responses_stream.sse": (
        "record",
        "responses-stream-effort-none",
        "streamed /v1/responses at effort none: a message item",
    ),
    "responses_stream_reasoning.sse": (
        "record",
        "responses-truncated-stream",
        "streamed /v1/responses cut at 8 tokens: a reasoning item, the last event "
        "response.completed with status incomplete",
    ),
}
PAGES = {
    "metrics.prom": ("record", "metrics-after-8001", "GET /metrics, no speculative decoding"),
    "metrics_spec_idle.prom": (
        "record",
        "metrics-idle-8000",
        "GET /metrics with ngram speculation, before the recorder's requests",
    ),
    "metrics_spec_after.prom": (
        "record",
        "metrics-after-8000",
        "GET /metrics with ngram speculation, after the recorder's requests",
    ),
}


def load(which: str) -> dict[str, dict[str, object]]:
    return json.loads((REC / FILES[which][0]).read_text())


def describe(which: str, key: str, entry: dict[str, object], what: str) -> list[str]:
    req = entry["request"]
    assert isinstance(req, dict)
    port = int(req["port"])
    served = PORTS[port] + (DEV if port == 8000 and which == "record" else "")
    body = json.dumps(req.get("body"))
    if len(body) > 300:
        body = body[:300] + "… (whole request in the recording)"
    return [
        f"RECORDED from the real server: {what}.",
        f"recording: tests/fixtures/engines/vllm/recorded/{FILES[which][0]} entry {key!r}",
        f"  ({FILES[which][1]}, 2026-12-03), HTTP {entry['status']}",
        f"request: {req['method']} {req['path']} {body}",
        f"server: {served}",
    ]


def main() -> None:
    recs = {k: load(k) for k in FILES}
    for name, (which, key, what) in JSON_FIXTURES.items():
        entry = recs[which][key]
        parsed = json.loads(str(entry["body"]))
        (DIR / name).write_text(json.dumps(parsed, indent=1, ensure_ascii=False) + "\n")
        src = describe(which, key, entry, what)
        (DIR / name.replace(".json", ".source.txt")).write_text("\n".join(src) + "\n")
    for name, (which, key, what) in SSE_FIXTURES.items():
        entry = recs[which][key]
        (DIR / name).write_text(str(entry["body"]))
        src = describe(which, key, entry, what)
        (DIR / name.replace(".sse", ".source.txt")).write_text("\n".join(src) + "\n")
    for name, (which, key, what) in PAGES.items():
        entry = recs[which][key]
        head = [f"# FIXTURE vllm/{name}"] + [
            f"# SOURCE {line}" for line in describe(which, key, entry, what)
        ]
        (DIR / name).write_text("\n".join(head) + "\n" + str(entry["body"]))
    # The speculative-decoding families alone, for a page without them (the replay adds them).
    after = str(recs["record"]["metrics-after-8000"]["body"]).splitlines()
    spec = [ln for ln in after if "vllm:spec_decode_" in ln]
    entry = recs["record"]["metrics-after-8000"]
    what = "the vllm:spec_decode_* families of GET /metrics with ngram speculation"
    head = ["# FIXTURE vllm/metrics_spec.prom"] + [
        f"# SOURCE {line}" for line in describe("record", "metrics-after-8000", entry, what)
    ]
    (DIR / "metrics_spec.prom").write_text("\n".join(head + spec) + "\n")


if __name__ == "__main__":
    main()
