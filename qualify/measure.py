"""Client-observed timings of one request, by the definitions in the design brief.

- TTFO: request sent to the first output token of any kind, reasoning included.
- TTFT (visible): request sent to the first visible content (or tool-call) token.
- effective prefill: prompt tokens / TTFO (includes queueing).
- decode tok/s: (completion_tokens - 1) / (last token - first token), tokens from `usage`.
- generation: first token to last token. E2E: request sent to response end.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import asdict, dataclass
from typing import Any

from qualify.stream import ChatOutcome


def percentile(values: list[float], q: float) -> float | None:
    """Linear-interpolated percentile, q in [0, 100]; None for no data."""
    if not values:
        return None
    s = sorted(values)
    k = (len(s) - 1) * q / 100.0
    lo, hi = math.floor(k), math.ceil(k)
    return s[lo] if lo == hi else s[lo] + (s[hi] - s[lo]) * (k - lo)


def median(values: list[float]) -> float | None:
    return percentile(values, 50.0)


@dataclass
class RequestTiming:
    prompt_tokens: int | None
    completion_tokens: int | None
    cached_tokens: int | None
    sse_chunks: int
    token_chunks: int
    chunks_per_token: float | None
    ttfo_s: float | None
    ttft_s: float | None
    generation_s: float | None
    e2e_s: float | None
    decode_tok_s: float | None
    effective_prefill_tok_s: float | None
    itl_p50_ms: float | None
    itl_p95_ms: float | None
    server_decode_tok_s: float | None
    server_prompt_ms: float | None
    decode_ratio_client_over_server: float | None
    ttft_minus_server_prompt_ms: float | None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def per_token_itl_ms(o: ChatOutcome) -> list[float]:
    """Inter-token latencies per token, not per chunk.

    A chunk may carry several tokens (speculative decoding); each gap between token-bearing
    chunks is shared by the tokens that chunk brought, estimated from `usage`.
    """
    times = o.token_chunk_times
    n = o.completion_tokens
    if len(times) < 2 or not n or n < 2:
        return []
    per_chunk = (n - 1) / (len(times) - 1)
    out: list[float] = []
    for a, b in itertools.pairwise(times):
        gap_ms = (b - a) * 1000.0 / per_chunk
        out.extend([gap_ms] * max(1, round(per_chunk)))
    return out


def timing(o: ChatOutcome) -> RequestTiming:
    n = o.completion_tokens
    gen = None
    if o.t_first_output is not None and o.t_last_token is not None:
        gen = o.t_last_token - o.t_first_output
    decode = (n - 1) / gen if (n and n > 1 and gen and gen > 0) else None
    prefill = None
    if o.prompt_tokens and o.t_first_output:
        prefill = o.prompt_tokens / o.t_first_output
    itl = per_token_itl_ms(o)
    tm = o.timings or {}
    server_decode = tm.get("predicted_per_second")
    server_prompt = tm.get("prompt_ms")
    ratio = decode / server_decode if (decode and server_decode) else None
    ttft_gap = None
    if o.t_first_output is not None and isinstance(server_prompt, int | float):
        ttft_gap = o.t_first_output * 1000.0 - float(server_prompt)
    return RequestTiming(
        prompt_tokens=o.prompt_tokens,
        completion_tokens=n,
        cached_tokens=o.cached_tokens,
        sse_chunks=o.chunks,
        token_chunks=len(o.token_chunk_times),
        chunks_per_token=(len(o.token_chunk_times) / n) if n else None,
        ttfo_s=o.t_first_output,
        ttft_s=o.t_first_visible,
        generation_s=gen,
        e2e_s=o.t_end,
        decode_tok_s=decode,
        effective_prefill_tok_s=prefill,
        itl_p50_ms=percentile(itl, 50),
        itl_p95_ms=percentile(itl, 95),
        server_decode_tok_s=float(server_decode)
        if isinstance(server_decode, int | float)
        else None,
        server_prompt_ms=float(server_prompt) if isinstance(server_prompt, int | float) else None,
        decode_ratio_client_over_server=ratio,
        ttft_minus_server_prompt_ms=ttft_gap,
    )
