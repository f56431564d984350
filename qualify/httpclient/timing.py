"""Client-observed timings of one request, by the definitions in the design brief.

- TTFO: request sent to the first output token of any kind, reasoning included.
- TTFT (visible): request sent to the first visible content (or tool-call) token.
- effective prefill: prompt tokens / TTFO (includes queueing).
- decode tok/s: (completion_tokens - 1) / (last token - first token), tokens from `usage`.
- generation: first token to last token. E2E: request sent to response end.

"Last token" is the last token the server counted. A stop token (EOS, a stop string, the end
of a tool call) is counted in `usage` but carries no text, so its only trace on the wire is the
chunk with `finish_reason` sent right after it was sampled; unless the stop was `length`, the
generation ends at that chunk. This is exactly llama-server's `predicted_per_second`:
(predicted_n - 1) / (time the last token was sampled - time the first one was), the first token
being free (it comes from the prompt's logits). The server's `prompt_ms` runs from the slot
starting on the prompt to the first token being sampled, so client TTFO >= `prompt_ms`, the
difference being HTTP, templating, tokenising, queueing and delivery.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass, replace

from qualify.httpclient.chat import ChatOutcome
from qualify.httpclient.window import ServerWindow
from qualify.records import Verdict, Written


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
    server_source: str | None = None

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def per_token_itl_ms(o: ChatOutcome) -> list[float]:
    """Inter-token latencies per token, not per chunk.

    A chunk may carry several tokens (speculative decoding); each gap between token-bearing
    chunks is shared by the tokens that chunk brought, estimated from `usage`.
    """
    times = list(o.token_chunk_times)
    end = generation_end(o)
    if times and end is not None and end > times[-1]:
        times.append(end)  # the stop token, counted in usage, arrived with finish_reason
    n = o.completion_tokens
    if len(times) < 2 or not n or n < 2:
        return []
    per_chunk = (n - 1) / (len(times) - 1)
    out: list[float] = []
    for a, b in itertools.pairwise(times):
        gap_ms = (b - a) * 1000.0 / per_chunk
        out.extend([gap_ms] * max(1, round(per_chunk)))
    return out


def generation_end(o: ChatOutcome) -> float | None:
    """When the last token the server counted arrived (see the module docstring)."""
    last, finish = o.t_last_token, o.t_finish
    if last is not None and finish is not None and o.finish_reason != "length":
        return max(last, finish)
    return last


def server_figures(o: ChatOutcome) -> tuple[float | None, float | None, str | None]:
    """The server's own decode tok/s and prompt time (ms) for this request, and their source.

    llama-server: `timings.predicted_per_second` and `timings.prompt_ms`. vLLM with
    `--enable-per-request-metrics`: `metrics.tokens_per_second` and
    `metrics.time_to_first_token_ms` (the server's own TTFT, queueing included).
    """
    tm = o.timings or {}
    decode, prompt = _num(tm.get("predicted_per_second")), _num(tm.get("prompt_ms"))
    if decode is not None or prompt is not None:
        return decode, prompt, "llama-server timings"
    vm = o.server_metrics or {}
    decode, prompt = _num(vm.get("tokens_per_second")), _num(vm.get("time_to_first_token_ms"))
    if decode is not None or prompt is not None:
        return decode, prompt, "vllm per-request metrics"
    return None, None, None


def _num(v: object) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def timing(o: ChatOutcome) -> RequestTiming:
    n, first, end = o.completion_tokens, o.t_first_output, generation_end(o)
    gen = end - first if first is not None and end is not None else None
    decode = (n - 1) / gen if (n and n > 1 and gen and gen > 0) else None
    prefill = o.prompt_tokens / first if o.prompt_tokens and first else None
    itl = per_token_itl_ms(o)
    server_decode, server_prompt, source = server_figures(o)
    ratio = decode / server_decode if (decode and server_decode) else None
    ttft_gap = None if first is None or server_prompt is None else first * 1000.0 - server_prompt
    return RequestTiming(
        prompt_tokens=o.prompt_tokens,
        completion_tokens=n,
        cached_tokens=o.cached_tokens,
        sse_chunks=o.chunks,
        token_chunks=len(o.token_chunk_times),
        chunks_per_token=(len(o.token_chunk_times) / n) if n else None,
        ttfo_s=first,
        ttft_s=o.t_first_visible,
        generation_s=gen,
        e2e_s=o.t_end,
        decode_tok_s=decode,
        effective_prefill_tok_s=prefill,
        itl_p50_ms=percentile(itl, 50),
        itl_p95_ms=percentile(itl, 95),
        server_decode_tok_s=server_decode,
        server_prompt_ms=server_prompt,
        decode_ratio_client_over_server=ratio,
        ttft_minus_server_prompt_ms=ttft_gap,
        server_source=source,
    )


def client_window(timings: Iterable[RequestTiming]) -> ClientWindow:
    """The client's figures over a cell by the server histograms' definitions
    (`qualify.serving.histograms`): decode tok/s = sum(n_i - 1) / sum(generation_i), and the
    mean TTFO; `complete` is False when a request lacks either (the cell is then not compared)."""
    ts = list(timings)
    steps = sum((t.completion_tokens or 0) - 1 for t in ts)
    gen = sum(t.generation_s or 0.0 for t in ts)
    ttfo = [t.ttfo_s for t in ts if t.ttfo_s is not None]
    complete = bool(ts) and all(
        t.completion_tokens and t.generation_s is not None and t.ttfo_s is not None for t in ts
    )
    return ClientWindow(
        requests=len(ts),
        complete=complete,
        decode_tok_s=steps / gen if gen > 0 and steps > 0 else None,
        ttfo_ms_mean=sum(ttfo) / len(ttfo) * 1000.0 if ttfo else None,
    )


def with_server_window(
    timings: list[RequestTiming], window: ServerWindow | None
) -> tuple[list[RequestTiming], dict[str, object]]:
    """A cell's timings with the server's figures from its histograms, where the server gave
    none per request (vLLM): every request of the cell carries the cell's comparison, the
    client's cell decode tok/s over the server's and the client's mean TTFO minus the server's
    mean TTFT, so `fidelity()` and the fidelity gates read it as they read per-request figures.
    Returns the timings and what was compared (`why` when nothing was)."""
    out: dict[str, object] = {"window": None if window is None else window.as_dict()}
    if window is None:
        return timings, {**out, "why": "the server keeps no latency histograms"}
    if any(t.server_source for t in timings):
        return timings, {**out, "why": "the server reported per-request figures"}
    client = client_window(timings)
    out["client"] = client.model_dump()
    if not window.ok:
        return timings, {**out, "why": window.problem}
    if not client.complete:
        return timings, {**out, "why": "a request of the cell has no usage or no token times"}
    server_decode, server_ttft = window.decode_tok_s, window.ttft_ms_mean
    decode, ttfo = client.decode_tok_s, client.ttfo_ms_mean
    ratio = decode / server_decode if decode and server_decode else None
    gap = ttfo - server_ttft if ttfo is not None and server_ttft is not None else None
    filled = [
        replace(
            t,
            server_decode_tok_s=server_decode,
            server_prompt_ms=server_ttft,
            decode_ratio_client_over_server=ratio,
            ttft_minus_server_prompt_ms=gap,
            server_source=window.source,
        )
        for t in timings
    ]
    front = window.frontend_decode_tok_s
    out["frontend_decode_ratio"] = decode / front if front and decode is not None else None
    return filled, {**out, "decode_ratio": ratio, "ttft_minus_server_ms": gap, "why": None}


def fidelity(timings: Iterable[RequestTiming]) -> dict[str, float | str | None]:
    """The client's figures against the server's own, over timed requests (`data.fidelity`).

    `decode_ratio` is client decode tok/s over the server's; `ttft_minus_server_prompt_ms` is
    client TTFO minus the server's prompt time, which cannot be negative when both clocks and
    definitions are right (`ttft_below_server_prompt` counts the requests where it is). Requests
    the server reported nothing for are counted in `requests` only; no figure is a null.
    """
    ts = list(timings)
    ratios = [t.decode_ratio_client_over_server for t in ts]
    gaps = [t.ttft_minus_server_prompt_ms for t in ts]
    r = [v for v in ratios if v is not None]
    g = [v for v in gaps if v is not None]
    return {
        "n": sum(1 for a, b in zip(ratios, gaps, strict=True) if a is not None or b is not None),
        "requests": len(ts),
        "source": next((t.server_source for t in ts if t.server_source), None),
        "n_decode": len(r),
        "decode_ratio_median": median(r),
        "decode_ratio_p5": percentile(r, 5),
        "decode_ratio_p95": percentile(r, 95),
        "n_ttft": len(g),
        "ttft_minus_server_prompt_ms_median": median(g),
        "ttft_minus_server_prompt_ms_p95": percentile(g, 95),
        "ttft_minus_server_prompt_ms_min": min(g) if g else None,
        "ttft_below_server_prompt": sum(1 for v in g if v < 0),
    }


class FidelitySummary(Written):
    """A `fidelity()` summary as a record keeps it (context per concurrency, A/B per lane)."""

    n: int = 0
    requests: int = 0
    source: str | None = None
    n_decode: int = 0
    decode_ratio_median: float | None = None
    decode_ratio_p5: float | None = None
    decode_ratio_p95: float | None = None
    n_ttft: int = 0
    ttft_minus_server_prompt_ms_median: float | None = None
    ttft_minus_server_prompt_ms_p95: float | None = None
    ttft_minus_server_prompt_ms_min: float | None = None
    ttft_below_server_prompt: int = 0


class ClientWindow(Written):
    """`client_window`: the client's figures over a cell by the histograms' definitions."""

    requests: int = 0
    complete: bool = False
    decode_tok_s: float | None = None
    ttfo_ms_mean: float | None = None


class ServerComparison(Written):
    """What `with_server_window` compared over a cell; `why` when nothing was."""

    window: ServerWindow | None = None
    client: ClientWindow | None = None
    decode_ratio: float | None = None
    # the client's decode over the front end's (e2e - TTFT, vLLM): recorded, not judged
    frontend_decode_ratio: float | None = None
    ttft_minus_server_ms: float | None = None
    why: str | None = None


def fidelity_verdict(
    summary: FidelitySummary, decode_tolerance: float, ttft_bound_ms: float
) -> tuple[Verdict, list[str]]:
    """The one rule every stage's fidelity gate decides by: `fail` where the client disagrees
    with the server (`fidelity_reasons`), else `inconclusive` where the server reported nothing
    to compare, else `pass`."""
    reasons = fidelity_reasons(summary, decode_tolerance, ttft_bound_ms)
    if reasons:
        return Verdict.FAIL, reasons
    missing = [
        f"the server reported no {what} for {summary.requests} timed requests"
        for what, n in (("decode rate", summary.n_decode), ("prompt time", summary.n_ttft))
        if not n
    ]
    if missing:
        return Verdict.INCONCLUSIVE, missing
    return Verdict.PASS, []


def fidelity_reasons(
    f: FidelitySummary, decode_tolerance: float = 0.03, ttft_slack_ms: float = 15.0
) -> list[str]:
    """Where a `fidelity()` summary disagrees with the server; empty when it agrees.

    The TTFT slack holds at concurrency 1 only: with requests queued behind others, the
    client's TTFT includes waiting that the server's prompt time does not.
    """
    out: list[str] = []
    ratio, gap = f.decode_ratio_median, f.ttft_minus_server_prompt_ms_median
    if ratio is not None and abs(ratio - 1.0) > decode_tolerance:
        out.append(
            f"fidelity.decode_ratio_median is {ratio:.4f}: client decode tok/s differs from the "
            f"server's by more than {decode_tolerance:.0%}"
        )
    if gap is not None and not 0.0 <= gap <= ttft_slack_ms:
        out.append(
            f"fidelity.ttft_minus_server_prompt_ms_median is {gap:.2f} ms: expected 0 to "
            f"{ttft_slack_ms:g} ms above the server's prompt time"
        )
    if f.ttft_below_server_prompt:
        out.append(
            f"fidelity.ttft_below_server_prompt is {f.ttft_below_server_prompt}: a "
            "client TTFT below the server's prompt time means a clock or definition error"
        )
    return out
