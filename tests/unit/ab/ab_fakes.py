"""A vLLM-like server on httpx.MockTransport, and lanes that switch between two of them.

The candidate lane packs several tokens into each SSE chunk, as vLLM does under speculative
decoding, and counts drafts in `vllm:spec_decode_*` counters; the control sends one token per
chunk and, like vLLM without `--speculative-config`, registers no spec counters at all.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from qualify.candidate import LoadedCandidate, load_candidate
from qualify.evidence.store import EvidenceStore
from qualify.gates.thresholds import Thresholds
from qualify.httpclient.client import Client
from qualify.progress import Progress
from qualify.stage import StageContext

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "smollm2"
WORDS = [
    "the",
    "quick",
    "brown",
    "fox",
    "jumps",
    "over",
    "a",
    "lazy",
    "dog",
    "near",
    "river",
    "bank",
    "today",
]


@dataclass
class FakeEngine:
    """What one lane's server does: tokens per chunk, counters, and faults on demand."""

    tokens_per_chunk: int = 1
    chunks: int = 16
    gap_s: float = 0.001
    spec_counters: bool = False
    draft_len: int = 4
    reasoning_only: set[str] = field(default_factory=set)
    degenerate: set[str] = field(default_factory=set)
    server_timings: dict[str, float] | None = None
    fail: set[str] = field(default_factory=set)
    no_usage: bool = False
    drafts: int = 0
    draft_tokens: int = 0
    accepted: int = 0
    per_pos: list[int] = field(default_factory=lambda: [0, 0, 0, 0])
    requests: list[dict[str, Any]] = field(default_factory=list)

    def metrics(self) -> str:
        lab = 'engine="0",model_name="m"'
        lines = [
            "# TYPE vllm:num_requests_running gauge",
            f"vllm:num_requests_running{{{lab}}} 0.0",
            "# TYPE vllm:num_requests_waiting gauge",
            f"vllm:num_requests_waiting{{{lab}}} 0.0",
            "# TYPE vllm:kv_cache_usage_perc gauge",
            f"vllm:kv_cache_usage_perc{{{lab}}} 0.25",
        ]
        if self.spec_counters:
            for name, value in (
                ("num_drafts", self.drafts),
                ("num_draft_tokens", self.draft_tokens),
                ("num_accepted_tokens", self.accepted),
            ):
                lines += [
                    f"# TYPE vllm:spec_decode_{name} counter",
                    f"vllm:spec_decode_{name}_total{{{lab}}} {float(value)}",
                ]
            lines.append("# TYPE vllm:spec_decode_num_accepted_tokens_per_pos counter")
            for i, v in enumerate(self.per_pos):
                lines.append(
                    f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{lab},position="{i}"}} '
                    f"{float(v)}"
                )
        return "\n".join(lines) + "\n"

    def _count(self, tokens: int) -> None:
        # Every chunk after the first is one verified draft: k accepted plus the bonus token.
        steps = self.chunks - 1
        self.drafts += steps
        self.draft_tokens += steps * self.draft_len
        self.accepted += steps * (self.tokens_per_chunk - 1)
        for i in range(self.tokens_per_chunk - 1):
            self.per_pos[i] += steps

    async def sse(self, body: dict[str, Any]) -> AsyncIterator[bytes]:
        prompt = body["messages"][0]["content"]
        field_name = "reasoning" if any(p in prompt for p in self.reasoning_only) else "content"
        yield _data({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]})
        stuck = any(p in prompt for p in self.degenerate)
        for c in range(self.chunks):
            await asyncio.sleep(self.gap_s)
            text = " ".join(WORDS[(c + j) % len(WORDS)] for j in range(self.tokens_per_chunk))
            if stuck:  # a drafter's favourite: 1000000...
                text = ("1" if c == 0 else "") + "0" * 8 * self.tokens_per_chunk
            yield _data({"choices": [{"index": 0, "delta": {field_name: " " + text}}]})
        tokens = self.chunks * self.tokens_per_chunk
        finish = "length" if field_name == "reasoning" else "stop"
        yield _data({"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
        if not self.no_usage:
            usage = {"prompt_tokens": 40, "completion_tokens": tokens, "total_tokens": 40 + tokens}
            last: dict[str, Any] = {"choices": [], "usage": usage}
            if self.server_timings is not None:
                last["timings"] = self.server_timings
            yield _data(last)
        if self.spec_counters:
            self._count(tokens)
        yield b"data: [DONE]\n\n"

    async def handle(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/metrics":
            return httpx.Response(200, text=self.metrics())
        body = json.loads(request.content)
        self.requests.append(body)
        if any(p in body["messages"][0]["content"] for p in self.fail):
            return httpx.Response(500, json={"error": {"message": "boom", "type": "server_error"}})
        return httpx.Response(
            200, headers={"content-type": "text/event-stream"}, content=self.sse(body)
        )


def _data(obj: dict[str, Any]) -> bytes:
    return f"data: {json.dumps(obj)}\n\n".encode()


class FakeLanes:
    """Lanes over mock servers: one lane at a time, every switch recorded."""

    def __init__(self, loaded: dict[str, LoadedCandidate], engines: dict[str, FakeEngine]):
        self.loaded = loaded
        self.engines = engines
        self.current: str | None = None
        self.process = None
        self.launches: list[dict[str, object]] = []
        self.switches: list[str] = []
        self._client: Client | None = None

    def has(self, lane: str) -> bool:
        return lane in self.loaded

    async def use(self, lane: str) -> Client:
        if lane != self.current or self._client is None:
            await self.stop()
            self.switches.append(lane)
            transport = httpx.MockTransport(self.engines[lane].handle)
            self._client = Client("http://mock.invalid", transport=transport)
            self.current = lane
        return self._client

    def died(self) -> bool:
        return False

    async def stop(self) -> None:
        if self._client is not None:
            await self._client.aclose()
        self._client = None
        self.current = None


PROMPTS = """\
schema_version: 1
warmup: Say hello in one short sentence.
prompts:
  - id: summarise
    kind: summarise
    text: Summarise the plot of Hamlet in two sentences.
  - id: code
    kind: code
    text: Write a Python function that reverses a string.
  - id: table
    kind: table
    text: Which month in this table was wettest? | Jan | 40 | Feb | 55 |
"""


def make_candidate(tmp: Path, extra: str = "") -> tuple[LoadedCandidate, LoadedCandidate]:
    """The demo candidate as a vLLM recipe with a lean A/B, and its control."""
    text = (EXAMPLE / "candidate.toml").read_text()
    text = text.replace('engine = "llama.cpp"', 'engine = "vllm"')
    # the fake drafts four tokens a step and registers four per-position counters
    text = text.replace("draft_tokens = 64", "draft_tokens = 4")
    lean = 'runs = 3\nmax_tokens = 32\nwarmups = 1\nprompts = "prompts.yaml"\n' + extra
    text = text.replace("runs = 3\nmax_tokens = 128\n", lean)
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "candidate.toml").write_text(text)
    (tmp / "control.toml").write_text((EXAMPLE / "control.toml").read_text())
    (tmp / "prompts.yaml").write_text(PROMPTS)
    return load_candidate(tmp / "candidate.toml"), load_candidate(tmp / "control.toml")


def context(
    tmp: Path,
    engines: dict[str, FakeEngine],
    extra: str = "",
    thresholds: Thresholds | None = None,
) -> StageContext:
    cand, ctrl = make_candidate(tmp / "cand", extra)
    run = EvidenceStore(tmp / "evidence").new_run(cand.candidate.name)
    lanes = FakeLanes({"candidate": cand, "control": ctrl}, engines)
    return StageContext(
        "ab",
        cand,
        run,
        run.new_attempt("ab"),
        lanes,  # type: ignore[arg-type]
        Progress(quiet=True),
        thresholds=thresholds or Thresholds(),
    )
