"""The fidelity summary: client figures against the server's own, and where they disagree."""

from __future__ import annotations

import pytest

from qualify.httpclient.chat import ChatOutcome
from qualify.httpclient.timing import (
    FidelitySummary,
    RequestTiming,
    fidelity,
    fidelity_reasons,
    timing,
)


def outcome(server: dict[str, float] | None, vllm: dict[str, float] | None = None) -> ChatOutcome:
    """Eleven tokens over 0.1 s (100 tok/s), first output at 0.12 s."""
    return ChatOutcome(
        usage={"prompt_tokens": 10, "completion_tokens": 11},
        timings=server,
        server_metrics=vllm,
        finish_reason="length",
        t_first_output=0.12,
        t_first_visible=0.12,
        t_last_token=0.22,
        token_chunk_times=[0.12 + 0.01 * i for i in range(11)],
    )


def test_timing_reads_llama_server_timings() -> None:
    """llama-server's predicted_per_second and prompt_ms are set against the client's."""
    t = timing(outcome({"predicted_per_second": 100.0, "prompt_ms": 115.0}))
    assert t.server_source == "llama-server timings"
    assert t.decode_ratio_client_over_server == pytest.approx(1.0)
    assert t.ttft_minus_server_prompt_ms == pytest.approx(5.0)


def test_timing_reads_vllm_per_request_metrics() -> None:
    """vLLM's per-request metrics (tokens_per_second, time_to_first_token_ms) are used."""
    t = timing(outcome(None, {"tokens_per_second": 80.0, "time_to_first_token_ms": 100.0}))
    assert t.server_source == "vllm per-request metrics"
    assert t.decode_ratio_client_over_server == pytest.approx(1.25)
    assert t.ttft_minus_server_prompt_ms == pytest.approx(20.0)


def test_summary_counts_only_requests_with_server_figures() -> None:
    """Requests without server timings count in `requests`, not in `n` or the medians."""
    ts: list[RequestTiming] = [
        timing(outcome({"predicted_per_second": s, "prompt_ms": p}))
        for s, p in ((100.0, 115.0), (50.0, 110.0), (200.0, 119.0))
    ] + [timing(outcome(None))]
    f = fidelity(ts)
    assert (f["n"], f["requests"], f["n_decode"], f["n_ttft"]) == (3, 4, 3, 3)
    assert f["decode_ratio_median"] == pytest.approx(1.0)
    assert f["ttft_minus_server_prompt_ms_median"] == pytest.approx(5.0)
    assert f["ttft_minus_server_prompt_ms_min"] == pytest.approx(1.0)
    assert f["ttft_below_server_prompt"] == 0
    assert f["source"] == "llama-server timings"


def test_summary_of_nothing_is_null_not_zero() -> None:
    """With no server figures, every figure is null and nothing is called a disagreement."""
    f = fidelity([timing(outcome(None))])
    assert f["n"] == 0 and f["decode_ratio_median"] is None and f["source"] is None
    assert fidelity_reasons(FidelitySummary.model_validate(f)) == []


def test_reasons_name_each_disagreement() -> None:
    """A decode ratio off by >3%, a TTFT gap >15 ms and a negative gap are each named."""
    ts = [timing(outcome({"predicted_per_second": 90.0, "prompt_ms": 100.0}))]
    ts.append(timing(outcome({"predicted_per_second": 90.0, "prompt_ms": 130.0})))
    ts.append(timing(outcome({"predicted_per_second": 90.0, "prompt_ms": 90.0})))
    reasons = fidelity_reasons(FidelitySummary.model_validate(fidelity(ts)))
    assert any("decode_ratio_median is 1.1111" in r for r in reasons)
    assert any("ttft_below_server_prompt is 1" in r for r in reasons)
    ok = fidelity([timing(outcome({"predicted_per_second": 101.0, "prompt_ms": 110.0}))])
    assert fidelity_reasons(FidelitySummary.model_validate(ok)) == []
    late = fidelity([timing(outcome({"predicted_per_second": 100.0, "prompt_ms": 100.0}))])
    assert any(
        "ttft_minus_server_prompt_ms_median is 20.00 ms" in r
        for r in fidelity_reasons(FidelitySummary.model_validate(late))
    )


def test_one_verdict_rule_for_every_fidelity_gate() -> None:
    """`fidelity_verdict`: a disagreement fails, no server figure is inconclusive, else pass;
    the context ladder's and the A/B's gates both decide by it."""
    from qualify.httpclient.timing import FidelitySummary, fidelity_verdict
    from qualify.records import Verdict

    ok = fidelity([timing(outcome({"predicted_per_second": 101.0, "prompt_ms": 110.0}))])
    assert fidelity_verdict(FidelitySummary.model_validate(ok), 0.03, 15.0) == (Verdict.PASS, [])
    off = fidelity([timing(outcome({"predicted_per_second": 90.0, "prompt_ms": 110.0}))])
    verdict, reasons = fidelity_verdict(FidelitySummary.model_validate(off), 0.03, 15.0)
    assert verdict is Verdict.FAIL and "decode_ratio_median is 1.1111" in reasons[0]
    none = FidelitySummary.model_validate(fidelity([timing(outcome(None))]))
    verdict, reasons = fidelity_verdict(none, 0.03, 15.0)
    assert verdict is Verdict.INCONCLUSIVE
    assert reasons == [
        "the server reported no decode rate for 1 timed requests",
        "the server reported no prompt time for 1 timed requests",
    ]


def test_a_summary_writes_back_only_the_fields_it_was_given() -> None:
    """A summary an earlier build kept with fewer fields reads, and writes the same JSON."""
    from qualify.httpclient.timing import FidelitySummary

    old = {"n": 3, "decode_ratio_median": 1.0, "ttft_minus_server_prompt_ms_median": 4.0}
    assert FidelitySummary.model_validate(old).model_dump(mode="json") == old
    full = fidelity([timing(outcome({"predicted_per_second": 100.0, "prompt_ms": 115.0}))])
    assert FidelitySummary.model_validate(full).model_dump(mode="json") == full
