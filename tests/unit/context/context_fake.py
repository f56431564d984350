"""A small llama-server imitation for the context ladder's unit tests (no real server).

It renders the chat template the way llama-server does with Qwen3.5-4B.jinja, tokenizes with a
toy tokenizer (pieces of up to four word characters), keeps one slot's prompt for prefix
caching, reports idle gauges, and answers with the needle values it can "see".
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx

_PIECE = re.compile(r"\w{1,4}|[^\w\s]|\s+")
# Digits one token each, like most modern tokenizers: a hex nonce's tokens then vary with it.
_DIGIT_PIECE = re.compile(r"\d|[^\W\d]{1,4}|[^\w\s]|\s+")
_NEEDLE = re.compile(r"Note: the (?:vault code|registry number) [^\n]*? is (\d+)\.")


def toy_tokens(text: str, split_digits: bool = False) -> list[str]:
    return (_DIGIT_PIECE if split_digits else _PIECE).findall(text)


def render(msgs: list[dict[str, str]]) -> str:
    parts = [f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in msgs]
    return "".join(parts) + "<|im_start|>assistant\n<think>\n\n</think>\n\n"


@dataclass
class FakeLlama:
    """State of the imitation: what it was asked, how busy it claims to be, what it knows."""

    busy_scrapes: int = 0
    sees: str = "both"  # "both" | "deep" (a weak model) | "none"
    usage: bool = True
    metrics: bool = True
    tokenize: bool = True
    n_ctx: int | None = 8192
    total_slots: int = 1
    server_decode: float = 100.0  # what `timings.predicted_per_second` claims
    split_digits: bool = False
    answers: list[str] = field(default_factory=list)  # when set, each chat takes the next one
    slot: list[str] = field(default_factory=list)
    cached_total: int = 0
    calls: dict[str, int] = field(default_factory=dict)
    chats: list[dict[str, Any]] = field(default_factory=list)

    def handler(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        self.calls[path] = self.calls.get(path, 0) + 1
        body = json.loads(request.content) if request.content else {}
        if path == "/metrics":
            return self._metrics()
        if path == "/props":
            props = {"default_generation_settings": {"n_ctx": self.n_ctx}}
            return httpx.Response(200, json={**props, "total_slots": self.total_slots})
        if path == "/apply-template":
            return httpx.Response(200, json={"prompt": render(body["messages"])})
        if path == "/tokenize":
            if not self.tokenize:
                return httpx.Response(404, json={"error": {"message": "not found"}})
            return httpx.Response(
                200, json={"tokens": list(range(len(self.tokens(body["content"]))))}
            )
        if path == "/v1/chat/completions":
            return self._chat(body)
        return httpx.Response(404)

    def tokens(self, text: str) -> list[str]:
        return toy_tokens(text, self.split_digits)

    def _metrics(self) -> httpx.Response:
        if not self.metrics:
            return httpx.Response(501, json={"error": {"message": "metrics disabled"}})
        busy = 1 if self.busy_scrapes > 0 else 0
        self.busy_scrapes -= 1
        text = (
            f"llamacpp:requests_processing {busy}\nllamacpp:requests_deferred 0\n"
            f"llamacpp:prompt_tokens_cached_total {self.cached_total}\n"
        )
        return httpx.Response(200, text=text, headers={"content-type": "text/plain"})

    def _answer(self, prompt: str) -> str:
        values = _NEEDLE.findall(prompt)
        if self.sees == "deep":
            values = values[-1:]
        elif self.sees == "none":
            values = []
        return "The numbers are " + " and ".join(values) + "." if values else "I do not know."

    def _chat(self, body: dict[str, Any]) -> httpx.Response:
        self.chats.append(body)
        toks = self.tokens(render(body["messages"]))
        cache = 0
        for a, b in zip(self.slot, toks, strict=False):
            if a != b:
                break
            cache += 1
        cache = min(cache, len(toks) - 1)
        self.slot, self.cached_total = toks, self.cached_total + cache
        text = self.answers.pop(0) if self.answers else self._answer(render(body["messages"]))
        answer = toy_tokens(text)[: body.get("max_tokens", 64)]
        if not body.get("stream"):
            usage = {"prompt_tokens": len(toks), "completion_tokens": len(answer)}
            msg = {"role": "assistant", "content": "".join(answer)}
            return httpx.Response(200, json={"choices": [{"message": msg}], "usage": usage})
        return httpx.Response(
            200,
            content=self._sse(answer, len(toks), cache),
            headers={"content-type": "text/event-stream"},
        )

    def _sse(self, answer: list[str], prompt_n: int, cache: int) -> AsyncIterator[bytes]:
        lines = []
        for piece in answer:
            chunk = {"choices": [{"index": 0, "delta": {"content": piece}}]}
            lines.append(f"data: {json.dumps(chunk)}\n\n")
        last: dict[str, Any] = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
        if self.usage:
            last["usage"] = {
                "prompt_tokens": prompt_n,
                "completion_tokens": len(answer),
                "prompt_tokens_details": {"cached_tokens": cache},
            }
            last["timings"] = {
                "cache_n": cache,
                "prompt_n": prompt_n - cache,
                "prompt_ms": 1.0,
                "predicted_per_second": self.server_decode,
            }
        lines.append(f"data: {json.dumps(last)}\n\n")
        lines.append("data: [DONE]\n\n")

        async def body() -> AsyncIterator[bytes]:
            for line in lines:
                await asyncio.sleep(0.001)  # tokens arrive apart, as from a real server
                yield line.encode()

        return body()


class Kept:
    """The exchanges a cell sent, kept by label (`keep`, the Sender's), and read back as an
    `AttemptView` reads them (`exchange`, `trust`): a draft row's figures are the rebuild's."""

    def __init__(self) -> None:
        self.exchanges: dict[str, Any] = {}

    def keep(self, label: str, ex: Any) -> list[str]:
        self.exchanges[label] = ex
        return [label]

    def exchange(self, name: str) -> Any:
        return self.exchanges[name]

    def trust(self, what: str) -> None:
        pass

    def rows(
        self, drafts: list[Any], needles: Any, timings: dict[int, Any] | None = None
    ) -> list[dict[str, Any]]:
        """The draft rows as the stage seals them (`qualify.context.rebuild`), in their JSON
        form, every counted stream's timing added to `timings` by concurrency."""
        from qualify.context.rebuild import _row
        from qualify.context.record import Content

        contents = {"prose": Content(needles=list(needles.pair))}
        timings = {} if timings is None else timings
        return [_row(self, r, contents, timings).model_dump(mode="json") for r in drafts]  # type: ignore[arg-type]
