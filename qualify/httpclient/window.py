"""The server's own figures of one timed cell (read by `qualify.serving.histograms`)."""

from __future__ import annotations

from collections.abc import Mapping

from qualify.records import Written


class ServerWindow(Written):
    """What the server's histograms say of one cell: counts, sums (seconds), their figures."""

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

    @classmethod
    def from_dict(cls, kept: Mapping[str, object]) -> ServerWindow:
        """The window from its counts and sums (as measured, or as a record kept them) with the
        figures that follow from them, every field written; a record read as it is (an earlier
        build wrote fewer fields) is `model_validate`'s."""
        w = cls.model_validate(kept)
        ok = w.ok

        def mean_ms(n: float | None, s: float | None) -> float | None:
            return s / n * 1000.0 if ok and n and s is not None else None

        steps = w.decode_tokens
        if steps is None and w.generated_tokens is not None:
            steps = w.generated_tokens - w.requests
        w.decode_tok_s = steps / w.decode_s if ok and w.decode_s and steps and steps > 0 else None
        gen, e2e, ttft = w.generated_tokens, w.e2e_s, w.ttft_s
        span = e2e - ttft if e2e is not None and ttft is not None else 0.0
        s = gen - w.requests if gen is not None and w.decode_tokens is None else 0.0
        front = ok and s > 0 and span > 0 and w.e2e_n == w.ttft_n
        w.frontend_decode_tok_s = s / span if front else None
        w.ttft_ms_mean = mean_ms(w.ttft_n, w.ttft_s)
        w.prefill_ms_mean = mean_ms(w.prefill_n, w.prefill_s)
        w.queue_ms_mean = mean_ms(w.queue_n, w.queue_s)
        w.itl_ms_mean_per_step = mean_ms(w.itl_n, w.itl_s)
        w.__pydantic_fields_set__.update(cls.model_fields)
        return w

    def as_dict(self) -> dict[str, object]:
        return self.model_dump()
