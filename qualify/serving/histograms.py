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

SGLang (0.5.17 read) keeps no decode histogram. Its tokenizer manager observes, per finished
request, `sglang:e2e_request_latency_seconds` (request received to finished) and, per output it
hands on, `sglang:time_to_first_token_seconds` for the first and, for every later one,
`sglang:inter_token_latency_seconds` with `_sum` += the time since the previous output and
`_count` += the tokens it brought. Over a request the ITL `_sum` is its first output to its last
and the `_count` the tokens after the first output, so:

- server decode tok/s = Δ ITL `_count` / Δ ITL `_sum`; requests = Δ e2e `_count`;
- server TTFT = mean TTFT observation, as for vLLM.

These are the definitions the client's cell figures are compared with
(`qualify.httpclient.timing.with_server_window`). The deltas are trusted only when the
server counted exactly the requests the cell sent: another client, or a request still running
at the second scrape, makes the cell's server figures unknown, with the reason.
`--enable-per-request-metrics` is not used: its `tokens_per_second` includes the prefill and its
TTFT excludes the queue, so neither is the decode rate or the TTFT the client sees.
"""

from __future__ import annotations

from qualify.httpclient.window import ServerWindow
from qualify.serving.dialects import Dialect, MetricsSnapshot


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
    decode_tokens = None
    if decode_n is None and "itl_tokens" in h:  # SGLang: the ITL histogram counts tokens
        decode_n, _ = pair("e2e")
        decode_tokens, decode_s = pair("itl_tokens")
    if decode_n is None:
        return None
    _, generated = pair("generation_tokens")
    problem = None
    by = h.get("decode", h.get("e2e"))
    if expected is not None and decode_n != expected:
        problem = (
            f"{by} counted {decode_n:g} requests over the cell, which sent {expected}: "
            "another client used the server, or a request had not finished at the second scrape"
        )
    elif decode_n <= 0:
        problem = f"{by} did not move over the cell"
    elif generated is None and decode_tokens is None:
        problem = f"{h.get('generation_tokens')} is missing: the tokens decoded are unknown"
    window: dict[str, object] = {
        "source": f"{d.name} histograms (deltas around the cell)",
        "requests": decode_n,
        "generated_tokens": generated,
        "decode_s": decode_s,
        "problem": problem,
        "decode_tokens": decode_tokens,
    }
    for key in ("ttft", "prefill", "queue", "itl", "e2e"):
        window[f"{key}_n"], window[f"{key}_s"] = pair(key)
    return ServerWindow.from_dict(window)
