"""The server's own figures of one timed cell (read by `qualify.serving.histograms`)."""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import model_validator

from qualify.records import Written


class ServerWindow(Written):
    """What the server's histograms say of one cell: counts and sums (seconds), and the figures
    that follow from them, worked out on construction (a kept window reads back the same)."""

    source: str = ""
    requests: float = 0.0
    generated_tokens: float | None = None
    decode_s: float | None = None
    ttft_n: float | None = None
    ttft_s: float | None = None
    prefill_n: float | None = None
    prefill_s: float | None = None
    queue_n: float | None = None
    queue_s: float | None = None
    itl_n: float | None = None
    itl_s: float | None = None
    problem: str | None = None
    # the tokens `decode_s` covers, where the server counts them itself (SGLang's ITL histogram
    # counts each token after a request's first output); else n_i - 1 a request
    decode_tokens: float | None = None
    # the front end's request latency (vLLM: `e2e_request_latency_seconds`), stamped where the
    # TTFT is: e2e - TTFT is the decode window on the client's side of the engine
    e2e_n: float | None = None
    e2e_s: float | None = None
    # sum(n_i - 1) / sum(decode_i) over the cell's requests
    decode_tok_s: float | None = None
    # sum(n_i - 1) / sum(e2e_i - ttft_i), both stamped in the front end (kept beside the
    # engine-core `decode_tok_s`, which vLLM stamps where the engine made the tokens)
    frontend_decode_tok_s: float | None = None
    ttft_ms_mean: float | None = None
    prefill_ms_mean: float | None = None
    queue_ms_mean: float | None = None
    # mean time per engine step that gave a request tokens (not per token)
    itl_ms_mean_per_step: float | None = None

    @property
    def ok(self) -> bool:
        return self.problem is None

    @model_validator(mode="after")
    def _figures(self) -> ServerWindow:
        ok, d = self.ok, self.__dict__

        def mean_ms(n: float | None, s: float | None) -> float | None:
            return s / n * 1000.0 if ok and n and s is not None else None

        steps = self.decode_tokens
        if steps is None and self.generated_tokens is not None:
            steps = self.generated_tokens - self.requests
        decode = steps / self.decode_s if ok and self.decode_s and steps and steps > 0 else None
        front, gen, e2e, ttft = None, self.generated_tokens, self.e2e_s, self.ttft_s
        span = e2e - ttft if e2e is not None and ttft is not None else None
        if ok and self.decode_tokens is None and gen is not None and span is not None:
            s = gen - self.requests
            front = s / span if s > 0 and span > 0 and self.e2e_n == self.ttft_n else None
        d["decode_tok_s"], d["frontend_decode_tok_s"] = decode, front
        d["ttft_ms_mean"] = mean_ms(self.ttft_n, self.ttft_s)
        d["prefill_ms_mean"] = mean_ms(self.prefill_n, self.prefill_s)
        d["queue_ms_mean"] = mean_ms(self.queue_n, self.queue_s)
        d["itl_ms_mean_per_step"] = mean_ms(self.itl_n, self.itl_s)
        self.__pydantic_fields_set__.update(type(self).model_fields)  # every field is written
        return self

    @classmethod
    def from_dict(cls, kept: Mapping[str, object]) -> ServerWindow:
        return cls.model_validate(kept)

    def as_dict(self) -> dict[str, object]:
        return self.model_dump()
