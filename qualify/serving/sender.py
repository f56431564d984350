"""How a timed stage asks one server: its client, the engine's dialect and quirks, the request
fields and the evidence keeper. Every request streams, with usage."""

from __future__ import annotations

from dataclasses import dataclass

from qualify.httpclient.chat import ANY_ENGINE, ChatOutcome, Quirks, from_stream
from qualify.httpclient.client import Client
from qualify.httpclient.load import CHAT, Keep, Messages
from qualify.serving.dialects import Dialect


@dataclass
class Sender:
    """One server, as a timed stage asks it; `quirks` reads its answers (`adapter(engine).quirks`;
    every engine's reasoning fields when not given)."""

    client: Client
    dialect: Dialect
    body: dict[str, object]
    timeout_s: float
    idle_wait_s: float
    keep: Keep
    quirks: Quirks = ANY_ENGINE

    def request(self, msgs: Messages) -> dict[str, object]:
        return {
            **self.body,
            "messages": msgs,
            "stream": True,
            "stream_options": {"include_usage": True},
        }

    async def send(self, msgs: Messages, label: str) -> tuple[ChatOutcome, list[str]]:
        ex = await self.client.stream(CHAT, self.request(msgs), self.timeout_s)
        return from_stream(ex, self.quirks), self.keep(label, ex)
