"""Replaying recorded answers to the quality tasks through their real gate files and checks."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Callable
from typing import Any

import httpx

from qualify.gates.files import LoadedGate, default_gates_dir, load_gates
from qualify.gates.runner import run_gate
from qualify.httpclient.client import Client
from qualify.quality.tasks import QualityContext
from qualify.records import GateResult

Handler = Callable[[httpx.Request], httpx.Response]


def task(task_id: str) -> LoadedGate:
    """A task file from the project's `gates/quality/`, as the stage loads it."""
    gates, problems = load_gates(default_gates_dir(), "quality")
    assert not problems, problems
    return next(g for g in gates if g.gate.id == task_id)


def chat(
    content: str = "",
    tool_calls: list[dict[str, Any]] | None = None,
    finish: str = "stop",
    reasoning: str | None = None,
    tokens: int = 40,
) -> dict[str, Any]:
    """A chat completion in llama-server's shape (reasoning in `reasoning_content`)."""
    msg: dict[str, Any] = {"role": "assistant", "content": content}
    if reasoning is not None:
        msg["reasoning_content"] = reasoning
    if tool_calls is not None:
        msg["tool_calls"] = tool_calls
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": msg, "finish_reason": finish}],
        "usage": {"prompt_tokens": 90, "completion_tokens": tokens, "total_tokens": 90 + tokens},
    }


def call(name: str, arguments: dict[str, Any] | str) -> dict[str, Any]:
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": "call_1", "type": "function", "function": {"name": name, "arguments": args}}


def replay(*answers: dict[str, Any]) -> tuple[Handler, list[dict[str, Any]]]:
    """A server that gives the answers in turn (the last one again when they run out)."""
    seen: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content))
        return httpx.Response(200, json=answers[min(len(seen), len(answers)) - 1])

    return handler, seen


def run(task_id: str, *answers: dict[str, Any], scale: float = 1.0, **params: Any) -> GateResult:
    """Run one real task file against recorded answers; every attempt gets the next answer.
    `params` replace the task's own params (a shorter time limit keeps a hang test short)."""
    result, _ = run_seen(task_id, *answers, scale=scale, **params)
    return result


def run_seen(
    task_id: str, *answers: dict[str, Any], scale: float = 1.0, **params: Any
) -> tuple[GateResult, list[dict[str, Any]]]:
    handler, seen = replay(*answers)
    client = Client("http://mock", transport=httpx.MockTransport(handler), timeout_s=5.0)
    ctx = QualityContext(
        client=client,
        keep=lambda label, ex: [f"{label}.json"],
        write=lambda name, obj: [name],
        model="m",
        level="low",
        gates_dir=default_gates_dir(),
        budget_scale=scale,
    )

    async def go() -> GateResult:
        try:
            loaded = task(task_id)
            if params:
                loaded = dataclasses.replace(loaded, params=loaded.params.model_copy(update=params))
            return await run_gate(loaded, ctx)
        finally:
            await client.aclose()

    return asyncio.run(go()), seen


class FakeLanes:
    """Two lanes over one mock server each; every switch recorded."""

    def __init__(self, loaded: dict[str, Any], handlers: dict[str, Handler]) -> None:
        self.loaded, self.handlers = loaded, handlers
        self.current: str | None = None
        self.switches: list[str] = []
        self._client: Client | None = None

    def has(self, lane: str) -> bool:
        return lane in self.loaded

    async def use(self, lane: str) -> Client:
        if lane != self.current or self._client is None:
            await self.stop()
            self.switches.append(lane)
            transport = httpx.MockTransport(self.handlers[lane])
            self._client = Client("http://mock.invalid", transport=transport)
            self.current = lane
        return self._client

    async def stop(self) -> None:
        if self._client is not None:
            await self._client.aclose()
        self._client, self.current = None, None
