"""The server's own figures of one timed cell (read by `qualify.serving.histograms`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any


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
    # the tokens `decode_s` covers, where the server counts them itself (SGLang's ITL histogram
    # counts each token after a request's first output); else n_i - 1 a request
    decode_tokens: float | None = None
    # the front end's request latency (vLLM: `e2e_request_latency_seconds`), stamped where the
    # TTFT is: e2e - TTFT is the decode window on the client's side of the engine
    e2e_n: float | None = None
    e2e_s: float | None = None

    @property
    def ok(self) -> bool:
        return self.problem is None

    @property
    def frontend_decode_tok_s(self) -> float | None:
        """sum(n_i - 1) / sum(e2e_i - ttft_i), both stamped in the front end (kept beside the
        engine-core `decode_tok_s`, which vLLM stamps where the engine made the tokens)."""
        if not self.ok or self.decode_tokens is not None or self.generated_tokens is None:
            return None
        if self.e2e_s is None or self.ttft_s is None or self.e2e_n != self.ttft_n:
            return None
        steps, span = self.generated_tokens - self.requests, self.e2e_s - self.ttft_s
        return steps / span if steps > 0 and span > 0 else None

    @property
    def decode_tok_s(self) -> float | None:
        """sum(n_i - 1) / sum(decode_i) over the cell's requests."""
        if not self.ok or not self.decode_s:
            return None
        if self.decode_tokens is not None:
            steps = self.decode_tokens
        elif self.generated_tokens is not None:
            steps = self.generated_tokens - self.requests
        else:
            return None
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
    def from_dict(cls, kept: Mapping[str, object]) -> ServerWindow:
        """The window as `as_dict` kept it (its counts and sums; the figures follow from them)."""
        values: dict[str, Any] = {f.name: kept.get(f.name) for f in fields(cls)}  # raw, as kept
        return cls(**values)

    def as_dict(self) -> dict[str, object]:
        return {
            **asdict(self),
            "decode_tok_s": self.decode_tok_s,
            "frontend_decode_tok_s": self.frontend_decode_tok_s,
            "ttft_ms_mean": self.ttft_ms,
            "prefill_ms_mean": self.prefill_ms,
            "queue_ms_mean": self.queue_ms,
            "itl_ms_mean_per_step": self.itl_ms,
        }
