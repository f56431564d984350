"""Acceptance from counter deltas (llama.cpp and vLLM names) and SGLang's gauges."""

from __future__ import annotations

import pytest

from qualify.ab.acceptance import SpecCounters, acceptance, combined, response_drafts
from qualify.httpclient.chat import ChatOutcome
from qualify.serving.dialects import LLAMACPP, SGLANG, VLLM, MetricsSnapshot

LLAMA_BEFORE = """\
# TYPE llamacpp:spec_decode_num_draft_tokens_total counter
llamacpp:spec_decode_num_draft_tokens_total 100
# TYPE llamacpp:spec_decode_num_accepted_tokens_total counter
llamacpp:spec_decode_num_accepted_tokens_total 60
# TYPE llamacpp:spec_decode_num_drafts_total counter
llamacpp:spec_decode_num_drafts_total 10
"""
LLAMA_AFTER = """\
# TYPE llamacpp:spec_decode_num_draft_tokens_total counter
llamacpp:spec_decode_num_draft_tokens_total 180
# TYPE llamacpp:spec_decode_num_accepted_tokens_total counter
llamacpp:spec_decode_num_accepted_tokens_total 120
# TYPE llamacpp:spec_decode_num_drafts_total counter
llamacpp:spec_decode_num_drafts_total 30
# TYPE llamacpp:spec_decode_num_accepted_tokens_per_pos_total counter
llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="0"} 20
llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="1"} 15
llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="10"} 1
"""


def _read(text: str, d=LLAMACPP) -> SpecCounters:  # type: ignore[no-untyped-def]
    return SpecCounters.read(MetricsSnapshot.parse(text), d)


def test_llamacpp_formulas_over_deltas() -> None:
    """rate = Δaccepted/Δdraft_tokens, mean length = 1 + Δaccepted/Δdrafts, curve per Δdrafts."""
    acc = acceptance(_read(LLAMA_BEFORE), _read(LLAMA_AFTER), "llama.cpp")
    assert acc is not None
    assert (acc.drafts, acc.draft_tokens, acc.accepted) == (20, 80, 60)
    assert acc.rate == pytest.approx(0.75)
    assert acc.mean_length == pytest.approx(4.0)
    # positions absent before the run count from zero; position 10 sorts numerically
    assert len(acc.per_position) == 11
    assert acc.per_position[:2] == pytest.approx([1.0, 0.75])
    assert acc.per_position[10] == pytest.approx(0.05)
    assert "delta" in acc.source


def test_vllm_counters_with_labels() -> None:
    """vLLM's counters carry model and engine labels; the series are summed."""
    text = "\n".join(
        [
            "# TYPE vllm:spec_decode_num_drafts counter",
            'vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 5',
            'vllm:spec_decode_num_drafts_total{engine="1",model_name="m"} 5',
            "# TYPE vllm:spec_decode_num_draft_tokens counter",
            'vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} 50',
            "# TYPE vllm:spec_decode_num_accepted_tokens counter",
            'vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"} 25',
            "",
        ]
    )
    acc = acceptance(SpecCounters(0, 0, 0), _read(text, VLLM), "vllm")
    assert acc is not None and acc.drafts == 10 and acc.rate == pytest.approx(0.5)
    assert acc.mean_length == pytest.approx(3.5)


def test_no_counters_is_none_and_a_reset_is_refused() -> None:
    """An engine without spec counters gives None; a counter going down (restart) too."""
    empty = _read("# TYPE x gauge\nx 1\n")
    assert acceptance(empty, empty, "llama.cpp") is None
    assert acceptance(_read(LLAMA_AFTER), _read(LLAMA_BEFORE), "llama.cpp") is None


def test_sglang_gauges_are_marked_recent_batches() -> None:
    """SGLang's gauges are recorded as read, marked recent-batch only, with no counts."""
    text = (
        "# TYPE sglang:spec_accept_rate gauge\nsglang:spec_accept_rate 0.6\n"
        "# TYPE sglang:spec_accept_length gauge\nsglang:spec_accept_length 2.8\n"
    )
    snap = _read(text, SGLANG)
    acc = acceptance(snap, snap, "sglang")
    assert acc is not None and acc.rate == 0.6 and acc.mean_length == 2.8
    assert acc.drafts is None and "recent batches only" in acc.source


def test_combine_sums_counts_across_runs() -> None:
    """A lane's acceptance sums the runs' counts and recomputes the rates from the sums."""
    one = acceptance(_read(LLAMA_BEFORE), _read(LLAMA_AFTER), "llama.cpp")
    zero = acceptance(_read(LLAMA_AFTER), _read(LLAMA_AFTER), "llama.cpp")
    total = combined([one, zero])
    assert total is not None and total.drafts == 20 and total.rate == pytest.approx(0.75)
    assert "2 runs" in total.source
    assert zero is not None and zero.rate is None and zero.per_position == []
    assert combined([None, None]) is None


def test_per_response_draft_fields() -> None:
    """llama.cpp's per-response timings.draft_n / draft_n_accepted are summed as a check."""
    a = ChatOutcome(timings={"draft_n": 64, "draft_n_accepted": 48})
    b = ChatOutcome(timings={"predicted_n": 10})
    got = response_drafts([a, b, ChatOutcome()])
    assert got.draft_n == 64 and got.rate == pytest.approx(0.75)
    assert got.responses_with_drafts == 1
    assert response_drafts([b]).draft_n is None


def _sglang(verify: int, generated: int, width: int | None) -> str:
    text = (
        "# TYPE sglang:spec_verify_calls counter\n"
        f'sglang:spec_verify_calls_total{{model_name="m"}} {verify}\n'
        "# TYPE sglang:generation_tokens counter\n"
        f'sglang:generation_tokens_total{{model_name="m"}} {generated}\n'
        "# TYPE sglang:spec_accept_rate gauge\nsglang:spec_accept_rate 0.1\n"
    )
    if width is not None:
        text += f"# TYPE sglang:spec_num_draft_tokens gauge\nsglang:spec_num_draft_tokens {width}\n"
    return text


def test_sglang_counters_give_acceptance_over_the_run() -> None:
    """SGLang: drafts = Δverify calls, mean length = Δgenerated / Δverify calls, rate over
    (num_draft_tokens - 1) draft tokens per call; the recent-batch gauge is not used."""
    before, after = _read(_sglang(100, 1000, 4), SGLANG), _read(_sglang(150, 1150, 4), SGLANG)
    acc = acceptance(before, after, "sglang")
    assert acc is not None and "delta over the run" in acc.source
    assert (acc.drafts, acc.accepted, acc.draft_tokens) == (50, 100, 150)
    assert acc.mean_length == pytest.approx(3.0)
    assert acc.rate == pytest.approx(100 / 150)
    total = combined([acc, acc])
    assert total is not None and total.rate == pytest.approx(100 / 150)


def test_sglang_without_the_width_gauge_has_no_rate() -> None:
    """Without sglang:spec_num_draft_tokens the rate is unmeasurable by the server, said so."""
    acc = acceptance(
        _read(_sglang(0, 0, None), SGLANG), _read(_sglang(10, 40, None), SGLANG), "sglang"
    )
    assert acc is not None and acc.rate is None and acc.mean_length == pytest.approx(4.0)
    assert "unmeasurable by this server" in acc.unmeasured
    total = combined([acc])
    assert total is not None and total.rate is None and total.unmeasured
    assert (
        acceptance(_read(_sglang(10, 40, 4), SGLANG), _read(_sglang(5, 40, 4), SGLANG), "sglang")
        is None
    )
