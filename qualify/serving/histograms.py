"""The server's own timings of a timed cell, from its latency histograms: the change in each
histogram's `_sum` and `_count` between an idle scrape before the cell and one after it.

vLLM (v1 engine, 0.26 recorded) observes, per finished request, in engine-core time:

- `vllm:request_queue_time_seconds`: queued until first scheduled;
- `vllm:request_prefill_time_seconds`: first scheduled until the first token;
- `vllm:request_decode_time_seconds`: the first token until the last one;
- `vllm:request_generation_tokens`: the tokens it generated;

and per token step `vllm:time_to_first_token_seconds` (the request's arrival at the engine
front end, after templating and tokenizing, until its first token: queue and prefill included)
and `vllm:inter_token_latency_seconds` (one observation per engine step that gave the request
tokens: with speculative decoding one step may give several).

From those deltas, over the cell's requests:

- server decode tok/s = (generated tokens - requests) / decode seconds, that is
  sum(n_i - 1) / sum(decode_i): the first token is the prefill's;
- server TTFT = mean of the TTFT observations; queue and prefill means likewise.

These are the definitions the client's cell figures are compared with
(`qualify.httpclient.timing.with_server_window`). The deltas are trusted only when the
server counted exactly the requests the cell sent: another client, or a request still running
at the second scrape, makes the cell's server figures unknown, with the reason.
`--enable-per-request-metrics` is not used: its `tokens_per_second` includes the prefill and its
TTFT excludes the queue, so neither is the decode rate or the TTFT the client sees.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

from qualify.serving.dialects import Dialect, MetricsSnapshot

__all__ = ["ServerWindow", "server_window"]


@dataclass(frozen=True)
class ServerWindow:
    """What the server's histograms say of one cell: counts, sums (seconds) and figures."""

    source: str
    requests: float
    generated_tokens: float | None
    decode_s: float | None
    ttft_n: float | None
    ttft_s: float | None
    prefill_n: float | None
    prefill_s: float | None
    queue_n: float | None
    queue_s: float | None
    itl_n: float | None
    itl_s: float | None
    problem: str | None = None

    @property
    def ok(self) -> bool:
        return self.problem is None

    @property
    def decode_tok_s(self) -> float | None:
        """sum(n_i - 1) / sum(decode_i) over the cell's requests."""
        if not self.ok or self.generated_tokens is None or not self.decode_s:
            return None
        steps = self.generated_tokens - self.requests
        return steps / self.decode_s if steps > 0 else None

    @staticmethod
    def _mean_ms(n: float | None, s: float | None) -> float | None:
        return s / n * 1000.0 if n and s is not None else None

    @property
    def ttft_ms(self) -> float | None:
        return self._mean_ms(self.ttft_n, self.ttft_s) if self.ok else None

    @property
    def prefill_ms(self) -> float | None:
        return self._mean_ms(self.prefill_n, self.prefill_s) if self.ok else None

    @property
    def queue_ms(self) -> float | None:
        return self._mean_ms(self.queue_n, self.queue_s) if self.ok else None

    @property
    def itl_ms(self) -> float | None:
        """Mean time per engine step that gave a request tokens (not per token)."""
        return self._mean_ms(self.itl_n, self.itl_s) if self.ok else None

    @classmethod
    def from_dict(cls, kept: dict[str, Any]) -> ServerWindow:
        """The window as `as_dict` kept it (its counts and sums; the figures follow from them)."""
        values: dict[str, Any] = {f.name: kept.get(f.name) for f in fields(cls)}
        return cls(**values)

    def as_dict(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "decode_tok_s": self.decode_tok_s,
            "ttft_ms_mean": self.ttft_ms,
            "prefill_ms_mean": self.prefill_ms,
            "queue_ms_mean": self.queue_ms,
            "itl_ms_mean_per_step": self.itl_ms,
        }


def _delta(before: MetricsSnapshot, after: MetricsSnapshot, name: str) -> float | None:
    a, b = after.total(name), before.total(name)
    return None if a is None or b is None else a - b


def server_window(
    before: MetricsSnapshot | None,
    after: MetricsSnapshot | None,
    d: Dialect,
    expected: int | None = None,
) -> ServerWindow | None:
    """The cell's server figures from two idle scrapes; None when the engine keeps no such
    histograms (llama.cpp reports per request instead). `expected` is how many requests the
    cell sent: the window is marked with a problem unless the server counted exactly those."""
    h = dict(d.histograms)
    if not h or before is None or after is None:
        return None

    def pair(key: str) -> tuple[float | None, float | None]:
        name = h.get(key)
        if name is None:
            return None, None
        return _delta(before, after, f"{name}_count"), _delta(before, after, f"{name}_sum")

    decode_n, decode_s = pair("decode")
    if decode_n is None:
        return None
    _, generated = pair("generation_tokens")
    ttft_n, ttft_s = pair("ttft")
    prefill_n, prefill_s = pair("prefill")
    queue_n, queue_s = pair("queue")
    itl_n, itl_s = pair("itl")
    problem = None
    if expected is not None and decode_n != expected:
        problem = (
            f"{h['decode']} counted {decode_n:g} requests over the cell, which sent {expected}: "
            "another client used the server, or a request had not finished at the second scrape"
        )
    elif decode_n <= 0:
        problem = f"{h['decode']} did not move over the cell"
    elif generated is None:
        problem = f"{h.get('generation_tokens')} is missing: the tokens decoded are unknown"
    return ServerWindow(
        source=f"{d.name} histograms (deltas around the cell)",
        requests=decode_n,
        generated_tokens=generated,
        decode_s=decode_s,
        ttft_n=ttft_n,
        ttft_s=ttft_s,
        prefill_n=prefill_n,
        prefill_s=prefill_s,
        queue_n=queue_n,
        queue_s=queue_s,
        itl_n=itl_n,
        itl_s=itl_s,
        problem=problem,
    )
