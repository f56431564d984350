"""SGLang's server figures of a cell (`qualify.serving.histograms`): no decode histogram, so the
decode rate is the ITL histogram's tokens over its seconds, and the requests are the e2e
histogram's count. Two planted scrapes in SGLang 0.5.17's exposition (names and labels from
`sglang/srt/observability/metrics_collector.py`): three streamed requests of 33, 17 and 9
tokens, the first output of each carrying 1, 3 and 1 tokens."""

from __future__ import annotations

import json

import pytest

from qualify.httpclient.window import ServerWindow
from qualify.serving.dialects import SGLANG, MetricsSnapshot
from qualify.serving.histograms import server_window

L = 'model_name="SmolLM2-135M-Instruct",tp_rank="0"'


def page(req: int, itl_n: float, itl_s: float, e2e_s: float, ttft_s: float, gen: float) -> str:
    s = f'{{{L},is_streaming="true"}}'
    return "\n".join([
        f"sglang:e2e_request_latency_seconds_count{s} {req}",
        f"sglang:e2e_request_latency_seconds_sum{s} {e2e_s}",
        f"sglang:time_to_first_token_seconds_count{s} {req}",
        f"sglang:time_to_first_token_seconds_sum{s} {ttft_s}",
        f"sglang:inter_token_latency_seconds_count{{{L}}} {itl_n}",
        f"sglang:inter_token_latency_seconds_sum{{{L}}} {itl_s}",
        f"sglang:generation_tokens_histogram_count{{{L}}} {req}",
        f"sglang:generation_tokens_histogram_sum{{{L}}} {gen}",
        "sglang:num_running_reqs{" + L + "} 0.0",
        "",
    ])  # fmt: skip


BEFORE = MetricsSnapshot.parse(page(4, 100.0, 1.0, 2.0, 0.2, 104.0))
# + 3 requests: tokens after each first output 32 + 14 + 8 = 54 over 0.27 s of ITL sums
AFTER = MetricsSnapshot.parse(page(7, 154.0, 1.27, 2.6, 0.35, 163.0))


def test_the_decode_rate_is_the_itl_tokens_over_its_seconds() -> None:
    w = server_window(BEFORE, AFTER, SGLANG, expected=3)
    assert w is not None and w.ok, w
    assert w.requests == 3 and w.decode_tokens == 54
    assert w.decode_tok_s == pytest.approx(54 / 0.27)
    # not (generated - requests) / seconds: the second request's first output brought 3 tokens
    assert w.decode_tok_s != pytest.approx((59 - 3) / 0.27)
    assert w.ttft_ms_mean == pytest.approx(50.0)


def test_a_cell_the_server_counted_otherwise_has_no_figures() -> None:
    w = server_window(BEFORE, AFTER, SGLANG, expected=4)
    assert w is not None and not w.ok and "counted 3 requests" in (w.problem or "")
    assert w.decode_tok_s is None and w.ttft_ms_mean is None
    still = server_window(BEFORE, BEFORE, SGLANG)
    assert still is not None and "did not move" in (still.problem or "")


def test_the_window_is_kept_in_the_records_form() -> None:
    """What a stage keeps of the window (`ServerWindow`, extra fields forbidden) holds every
    field it writes, SGLang's token count included, and reads back with the same figures."""
    w = server_window(BEFORE, AFTER, SGLANG, expected=3)
    assert w is not None
    kept = ServerWindow.model_validate(json.loads(w.model_dump_json()))
    assert kept.decode_tokens == 54 and kept.decode_tok_s == pytest.approx(200.0)
    assert kept == w and kept.model_dump_json() == w.model_dump_json()
