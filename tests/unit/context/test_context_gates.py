"""The context judges over hand-built stage data: each one seen failing and passing."""

from __future__ import annotations

from typing import Any

import pytest

from qualify.context.judges import (
    ColdCacheParams,
    DegenerateParams,
    FidelityParams,
    IdleParams,
    NeedlesParams,
    cold_cache,
    degenerate,
    fidelity,
    idle,
    needles,
)
from qualify.context.record import Record
from qualify.gates.files import default_gates_dir
from qualify.gates.runner import judge_stage
from qualify.gates.thresholds import Thresholds
from qualify.records import Verdict

T = Thresholds()


def rung(target: int, planned: int, **kw: Any) -> dict[str, Any]:
    return {
        "target": target,
        "planned_tokens": planned,
        "clamped": target > planned,
        "window": 8192,
        "errors": [],
        "same_as": None,
        "contents": {"prose": {"needles": [{"depth": 50, "value": "12345"}]}},
        **kw,
    }


def stream(
    found: tuple[bool, bool] = (True, True), cached: int | None = 4, **kw: Any
) -> dict[str, Any]:
    return {
        "needles": {"50": found[0], "99": found[1]},
        "answer": "The numbers are 12345 and 67890.",
        "finish_reason": "stop",
        "cached_tokens": cached,
        "actual_prompt_tokens": 7930,
        "problem": None,
        "degenerate": None,
        "decode_tok_s": 50.0,
        "files": [],
        **kw,
    }


def row(target: int, pass_: str, streams: list[dict[str, Any]], **kw: Any) -> dict[str, Any]:
    ok = {"idle": True, "waited_s": 0.0, "reason": ""}
    return {
        "target": target,
        "planned_tokens": min(target, 7936),
        "pass": pass_,
        "content": "prose",
        "concurrency": len(streams),
        "verdict": "pass",
        "reasons": [],
        "streams": streams,
        "cached_tokens_metric_delta": None,
        "idle": {"before": ok, "after": ok},
        **kw,
    }


def ladder(*streams: dict[str, Any], target: int = 16384) -> dict[str, Any]:
    """One clamped rung (16384 → 7936) with a warm and a cold cell of the given streams."""
    return {
        "targets": [rung(target, min(target, 7936))],
        "rows": [
            row(target, "warm", [stream(cached=7929)]),
            row(target, "cold", list(streams) or [stream()]),
        ],
    }


# needles


def test_needles_named_by_the_size_run_and_say_the_target() -> None:
    """A clamped rung is judged as `needles@7936`, and says which target it stands for."""
    [j] = needles(Record.model_validate(ladder(stream())), NeedlesParams(), T)
    assert j.verdict is Verdict.PASS and j.part == "7936"
    assert j.metrics["target"] == 16384 and j.metrics["clamped"] is True
    assert j.reasons[0].startswith("target 16384, clamped to 7936")


def test_needles_an_unclamped_rung_is_named_by_its_target() -> None:
    [j] = needles(Record.model_validate(ladder(stream(), target=1024)), NeedlesParams(), T)
    assert j.part == "1024" and j.reasons == [] and j.verdict is Verdict.PASS


def test_needles_one_missed_needle_fails_naming_it() -> None:
    """The deep needle alone is not enough: the stream that missed the 50% one fails the rung."""
    [j] = needles(Record.model_validate(ladder(stream(found=(False, True)))), NeedlesParams(), T)
    assert j.verdict is Verdict.FAIL
    assert "cold prose c=1 stream 1 missed the 50% needle (12345)" in j.reasons[1]
    assert j.metrics["found_50"] == 1 and j.metrics["found_99"] == 2


def test_needles_depths_param_chooses_what_is_required() -> None:
    """A gate that asks only for the deep needle passes the same streams."""
    [j] = needles(
        Record.model_validate(ladder(stream(found=(False, True)))), NeedlesParams(depths=[99]), T
    )
    assert j.verdict is Verdict.PASS


def test_needles_a_broken_cell_or_rung_is_error() -> None:
    data = ladder(stream())
    data["rows"][1].update(verdict="error", reasons=["stream 1: HTTP 500"])
    assert needles(Record.model_validate(data), NeedlesParams(), T)[0].verdict is Verdict.ERROR
    data = ladder(stream())
    data["targets"][0]["errors"] = ["prose: sizing failed: no prompt"]
    assert needles(Record.model_validate(data), NeedlesParams(), T)[0].verdict is Verdict.ERROR


def test_needles_a_rung_with_nothing_run_is_inconclusive() -> None:
    data = ladder(stream())
    data["rows"] = []
    assert (
        needles(Record.model_validate(data), NeedlesParams(), T)[0].verdict is Verdict.INCONCLUSIVE
    )


def test_a_target_clamped_to_an_earlier_rung_is_not_judged_twice() -> None:
    """Two targets clamped to the same size make one gate, which names both targets."""
    data = ladder(stream())
    data["targets"].append(rung(32768, 7936, same_as=16384))
    [j] = needles(Record.model_validate(data), NeedlesParams(), T)
    assert j.part == "7936" and j.metrics["targets"] == [16384, 32768]


# cold-cache


def test_cold_cache_flattered_fails() -> None:
    """A cold stream served from the prefix cache fails the rung."""
    [j] = cold_cache(Record.model_validate(ladder(stream(cached=7000))), ColdCacheParams(), T)
    assert j.verdict is Verdict.FAIL and j.part == "7936"
    assert "the prefix cache flattered it" in j.reasons[-1]


def test_cold_cache_a_role_header_passes_and_the_limit_is_a_param() -> None:
    """A few cached tokens (the role header) pass; a tighter allowance fails the same data."""
    assert (
        cold_cache(Record.model_validate(ladder(stream(cached=30))), ColdCacheParams(), T)[
            0
        ].verdict
        is Verdict.PASS
    )
    tight = ColdCacheParams(min_allowance=8, max_cached_share=0.0)
    assert (
        cold_cache(Record.model_validate(ladder(stream(cached=30))), tight, T)[0].verdict
        is Verdict.FAIL
    )


def test_cold_cache_no_count_is_inconclusive() -> None:
    [j] = cold_cache(Record.model_validate(ladder(stream(cached=None))), ColdCacheParams(), T)
    assert j.verdict is Verdict.INCONCLUSIVE


def test_cold_cache_falls_back_to_the_counter_delta() -> None:
    data = ladder(stream(cached=None))
    data["rows"][1]["cached_tokens_metric_delta"] = 7000.0
    assert cold_cache(Record.model_validate(data), ColdCacheParams(), T)[0].verdict is Verdict.FAIL


# idle


def test_idle_busy_around_a_cell_is_error_and_quiet_passes() -> None:
    data = ladder(stream())
    assert idle(Record.model_validate(data), IdleParams(), T)[0].verdict is Verdict.PASS
    data["rows"][1]["idle"]["after"] = {"idle": False, "waited_s": 5.0, "reason": "1 running"}
    [j] = idle(Record.model_validate(data), IdleParams(), T)
    assert j.verdict is Verdict.ERROR and "1 running" in j.reasons[0]
    assert j.metrics == {"checks": 4, "max_waited_s": 5.0}


def test_idle_unknown_is_inconclusive() -> None:
    data = ladder(stream())
    data["rows"][0]["idle"]["before"] = {"idle": None, "waited_s": 0.0, "reason": "no gauges"}
    assert idle(Record.model_validate(data), IdleParams(), T)[0].verdict is Verdict.INCONCLUSIVE


# fidelity


def summary(ratio: float | None = 1.0, gap: float | None = 5.0, below: int = 0) -> dict[str, Any]:
    return {
        "n": 4,
        "requests": 4,
        "n_decode": 0 if ratio is None else 4,
        "decode_ratio_median": ratio,
        "n_ttft": 0 if gap is None else 4,
        "ttft_minus_server_prompt_ms_median": gap,
        "ttft_below_server_prompt": below,
    }


def fid(*per_c: tuple[int, dict[str, Any]], engine: str = "llama.cpp") -> dict[str, Any]:
    return {"fidelity": {"engine": engine, "by_concurrency": {str(c): s for c, s in per_c}}}


def test_fidelity_agreeing_passes_per_concurrency() -> None:
    [j] = fidelity(Record.model_validate(fid((1, summary()))), FidelityParams(), T)
    assert j.verdict is Verdict.PASS and j.part == "c=1"
    assert j.metrics["ttft_bound_ms"] == 15.0 and j.metrics["decode_tolerance"] == 0.03


def test_fidelity_decode_off_by_more_than_the_tolerance_fails() -> None:
    [j] = fidelity(Record.model_validate(fid((1, summary(ratio=1.05)))), FidelityParams(), T)
    assert j.verdict is Verdict.FAIL and "decode_ratio_median is 1.0500" in j.reasons[0]


@pytest.mark.parametrize("gap", [-2.0, 40.0])
def test_fidelity_ttft_gap_outside_the_bound_fails(gap: float) -> None:
    [j] = fidelity(Record.model_validate(fid((1, summary(gap=gap)))), FidelityParams(), T)
    assert j.verdict is Verdict.FAIL and "ttft_minus_server_prompt_ms_median" in j.reasons[0]


def test_fidelity_ttft_bound_comes_from_the_policy_per_engine_and_concurrency() -> None:
    """At c=4 a queue adds waiting: the policy's looser bound for that concurrency applies."""
    policy = Thresholds(fidelity_ttft_ms={"*": 15.0, "llama.cpp@c=4": 60.0})
    one, four = fidelity(
        Record.model_validate(fid((1, summary(gap=40.0)), (4, summary(gap=40.0)))),
        FidelityParams(),
        policy,
    )
    assert (one.part, one.verdict) == ("c=1", Verdict.FAIL)
    assert (four.part, four.verdict) == ("c=4", Verdict.PASS)


def test_fidelity_without_server_figures_is_inconclusive() -> None:
    [j] = fidelity(
        Record.model_validate(fid((1, summary(ratio=None, gap=None)))), FidelityParams(), T
    )
    assert j.verdict is Verdict.INCONCLUSIVE and "reported no decode rate" in j.reasons[0]
    [j] = fidelity(
        Record.model_validate({"fidelity": {"engine": "vllm", "by_concurrency": {}}}),
        FidelityParams(),
        T,
    )
    assert j.verdict is Verdict.INCONCLUSIVE


# degenerate


def flagged(data: dict[str, Any], n: int) -> dict[str, Any]:
    item = {
        "target": 16384,
        "planned_tokens": 7936,
        "pass": "warm",
        "content": "prose",
        "concurrency": 1,
    }
    data["degenerate"] = [{**item, "stream": 1, "reason": "a run of 60 digits"}] * n
    return data


def test_degenerate_answer_fails_the_advisory_gate_and_none_passes() -> None:
    [j] = degenerate(Record.model_validate(flagged(ladder(stream()), 1)), DegenerateParams(), T)
    assert j.verdict is Verdict.FAIL and "a run of 60 digits" in j.reasons[0]
    assert degenerate(Record.model_validate(flagged(ladder(stream()), 0)), DegenerateParams(), T)[
        0
    ].verdict is (Verdict.PASS)
    tolerant = DegenerateParams(max_streams=1)
    assert (
        degenerate(Record.model_validate(flagged(ladder(stream()), 1)), tolerant, T)[0].verdict
        is Verdict.PASS
    )


def test_degenerate_with_no_counted_stream_is_inconclusive() -> None:
    data = flagged(ladder(stream(problem="HTTP 500")), 0)
    data["rows"][0]["streams"] = []
    assert (
        degenerate(Record.model_validate(data), DegenerateParams(), T)[0].verdict
        is Verdict.INCONCLUSIVE
    )


# the shipped gate files


def test_shipped_context_gates_load_and_judge_by_the_size_run() -> None:
    """`gates/context/` declares every context gate; judged over a clamped ladder, the rung
    gates carry the size that ran and the advisory one keeps its severity."""
    data = {**ladder(stream()), **fid((1, summary())), "degenerate": []}
    results, problems = judge_stage("context", default_gates_dir(), data, T)
    assert problems == []
    assert {g.gate: g.verdict for g in results} == {
        "cold-cache@7936": Verdict.PASS,
        "degenerate": Verdict.PASS,
        "fidelity@c=1": Verdict.PASS,
        "idle": Verdict.PASS,
        "needles@7936": Verdict.PASS,
        # The audits: this ladder holds no tasks and no tool battery, one answer to judge.
        "ruler@7936": Verdict.INCONCLUSIVE,
        "garble@7936": Verdict.PASS,
        "deep-typed-tools": Verdict.INCONCLUSIVE,
        "deep-streaming-tools": Verdict.INCONCLUSIVE,
        "deep-tool-result": Verdict.INCONCLUSIVE,
        # no acceptance per cell in this ladder: not measured
        "acceptance-depth": Verdict.SKIPPED,
    }
    assert next(g for g in results if g.gate == "degenerate").severity == "advisory"
