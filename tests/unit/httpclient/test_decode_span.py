"""The client's decode window opens at the second token chunk where the stream counts its tokens
on every chunk (`continuous_usage_stats`): the first token's late delivery (the front end's
one-off work on a long prompt) must not shorten it. Streams without per-chunk counts keep the
first-token window, so evidence kept before them is derived as it was."""

from __future__ import annotations

import json

from qualify.httpclient.chat import from_stream
from qualify.httpclient.client import Exchange, SSEEvent
from qualify.httpclient.timing import client_window, timing

STEP = 0.010  # the engine's step: one token every 10 ms
LATE = 0.008  # the first token reaches the client 8 ms after its step; the rest on time
N = 21


def stream(counted: bool, late: float = LATE) -> Exchange:
    events = []
    for i in range(1, N + 1):
        t = 0.050 + (i - 1) * STEP + (late if i == 1 else 0.0)
        chunk: dict = {"choices": [{"index": 0, "delta": {"content": f"w{i} "}}]}
        if i == N:
            chunk["choices"][0]["finish_reason"] = "length"
        if counted:
            chunk["usage"] = {"prompt_tokens": 7000, "completion_tokens": i}
        events.append(SSEEvent(t=t, event="message", data=json.dumps(chunk)))
    final = {"choices": [], "usage": {"prompt_tokens": 7000, "completion_tokens": N}}
    events.append(SSEEvent(t=events[-1].t + 0.001, event="message", data=json.dumps(final)))
    events.append(SSEEvent(t=events[-1].t, event="message", data="[DONE]"))
    return Exchange(
        method="POST",
        url="http://x/v1/chat/completions",
        request_headers={},
        request_body={},
        status=200,
        events=events,
    )


def test_a_late_first_token_does_not_speed_up_a_counted_stream() -> None:
    t = timing(from_stream(stream(counted=True)))
    assert t.decode_steps == N - 2  # the tokens after the second chunk
    assert abs(t.decode_tok_s - 1 / STEP) < 1e-6  # the engine's rate, exactly
    # the first-token window is short by LATE: it would claim 19 steps in 0.192 s
    assert t.generation_s is not None and abs(t.generation_s - ((N - 1) * STEP - LATE)) < 1e-9


def test_without_per_chunk_counts_the_first_token_window_stays() -> None:
    t = timing(from_stream(stream(counted=False)))
    assert t.decode_steps == N - 1
    assert abs(t.decode_tok_s - (N - 1) / ((N - 1) * STEP - LATE)) < 1e-6
    assert t.decode_tok_s > 1 / STEP * 1.04  # the overstatement the counted window removes


def test_a_cell_sums_each_request_over_its_own_span() -> None:
    counted = [timing(from_stream(stream(counted=True, late=x))) for x in (0.0, 0.004, 0.012)]
    window = client_window(counted)
    assert window["complete"]
    assert abs(window["decode_tok_s"] - 1 / STEP) < 1e-6
    plain = client_window([timing(from_stream(stream(counted=False, late=0.012)))])
    assert plain["decode_tok_s"] > 1 / STEP * 1.05
