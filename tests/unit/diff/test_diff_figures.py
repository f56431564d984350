"""The figure judge on data built to fail it: a slower run beyond the margin is a regression,
noise is not, one reading is never counted, and another setting, engine or card is not
comparable; gates under two policies are listed and not counted."""

from __future__ import annotations

from qualify.capacity.record import Record as CapacityRecord
from qualify.diff.figures import Measure, compare_figures, compare_measure, judge, newcombe
from qualify.diff.gates import compare_gates, policy_differences
from qualify.present.record import GateOutcome, GateVerdict
from qualify.records import Verdict


def _capacity(decode: list[float], ttft: list[float], max_tokens: int = 64) -> CapacityRecord:
    return CapacityRecord.model_validate(
        {
            "settings": {"max_tokens": max_tokens, "ignore_eos": False, "level": None},
            "matrix": [
                {
                    "lane": "candidate",
                    "cell": "256-c1",
                    "length": 256,
                    "concurrency": 1,
                    "run_values": {"decode_tok_s_p50": decode, "aggregate_output_tok_s": decode},
                    "run_records": [{"ttft_p50_s": t, "e2e_p50_s": t + 1} for t in ttft],
                }
            ],
        }
    )


def test_a_slower_run_beyond_the_margin_is_a_regression() -> None:
    a = {"capacity": _capacity([100.0, 101.0, 99.0], [0.10, 0.11, 0.10])}
    b = {"capacity": _capacity([80.0, 81.0, 79.0], [0.10, 0.11, 0.10])}
    (cell,) = compare_figures(a, b, 3.0, [])
    decode = cell["measures"]["decode_tok_s_p50"]
    assert decode["verdict"] == "regression", decode
    assert decode["delta_pct"] == -20.0 and decode["ci95_pct"][1] < -3.0
    assert cell["measures"]["ttft_p50_s"]["verdict"] == "within margin"


def test_a_slower_first_token_is_a_regression_the_other_way_round() -> None:
    a = {"capacity": _capacity([100.0, 100.0, 100.0], [0.10, 0.11, 0.10])}
    b = {"capacity": _capacity([100.0, 100.0, 100.0], [0.20, 0.21, 0.20])}
    (cell,) = compare_figures(a, b, 3.0, [])
    assert cell["measures"]["ttft_p50_s"]["verdict"] == "regression"
    assert cell["measures"]["decode_tok_s_p50"]["verdict"] == "within margin"


def test_noise_and_a_small_slowdown_are_not_regressions() -> None:
    a = {"capacity": _capacity([100.0, 130.0, 70.0], [0.1, 0.1, 0.1])}
    b = {"capacity": _capacity([95.0, 125.0, 66.0], [0.1, 0.1, 0.1])}
    (cell,) = compare_figures(a, b, 3.0, [])
    assert cell["measures"]["decode_tok_s_p50"]["verdict"].startswith("worse, inconclusive")
    assert judge(-2.0, (-2.5, -1.5), 3.0) == "worse, within margin"
    assert judge(-10.0, (-12.0, -4.0), 3.0) == "regression"
    assert judge(5.0, (1.0, 9.0), 3.0) == "better"


def test_one_reading_is_shown_never_counted() -> None:
    m = compare_measure(
        Measure("tok/s", "higher", [100.0]), Measure("tok/s", "higher", [50.0]), 3.0
    )
    assert m["ci95"] is None and m["verdict"] == "worse beyond margin, one reading (not counted)"


def test_cells_under_another_setting_engine_or_card_are_not_comparable() -> None:
    a = {"capacity": _capacity([100.0] * 3, [0.1] * 3, max_tokens=64)}
    b = {"capacity": _capacity([50.0] * 3, [0.1] * 3, max_tokens=128)}
    (cell,) = compare_figures(a, b, 3.0, [])
    assert not cell["comparable"]
    assert cell["why"] == "measured under another setting: max_tokens 64 -> 128"
    (cell,) = compare_figures(a, a, 3.0, ["the engine differs (llama.cpp in A, vllm in B)"])
    assert not cell["comparable"] and "engine differs" in cell["why"]
    (cell,) = compare_figures(a, {}, 3.0, [])
    assert cell["why"] == "measured only in A: the capacity stage did not run in B"


def test_acceptance_rates_get_a_score_interval() -> None:
    lo, hi = newcombe((720, 1000), (140, 1000))  # a loader bug: 72% -> 14%
    assert -0.62 < lo < hi < -0.54
    m = compare_measure(
        Measure("rate", "higher", counts=(720, 1000)),
        Measure("rate", "higher", counts=(140, 1000)),
        3.0,
    )
    assert m["verdict"] == "regression"
    same = compare_measure(
        Measure("rate", "higher", counts=(72, 100)),
        Measure("rate", "higher", counts=(70, 100)),
        3.0,
    )
    assert same["verdict"] == "within margin" or same["verdict"].startswith("worse, inconclusive")


def _gate(key: str, verdict: Verdict, status: str) -> GateOutcome:
    stage, gate = key.split("/", 1)
    return GateOutcome(
        key=key,
        stage=stage,
        gate=gate,
        verdict=verdict,
        required=status != "advisory",
        critical=False,
        status=status,  # type: ignore[arg-type]
        authoritative=GateVerdict(attempt=1, verdict=verdict),
    )


def test_gate_changes_and_what_counts() -> None:
    a = [
        _gate("vram/reserve@0", Verdict.PASS, "pass"),
        _gate("context/degenerate", Verdict.PASS, "advisory"),
        _gate("ab/decode", Verdict.FAIL, "blocks"),
        _gate("quality/x@off", Verdict.PASS, "pass"),
    ]
    b = [
        _gate("vram/reserve@0", Verdict.FAIL, "blocks"),
        _gate("context/degenerate", Verdict.FAIL, "advisory"),
        _gate("ab/decode", Verdict.PASS, "pass"),
        _gate("context/ruler@4096", Verdict.FAIL, "blocks"),
    ]
    g = compare_gates(a, b, [])
    changes = {r["key"]: r["change"] for r in g["rows"]}
    assert changes == {
        "vram/reserve@0": "regressed",
        "context/degenerate": "regressed",
        "ab/decode": "fixed",
        "quality/x@off": "removed",
        "context/ruler@4096": "new",
    }
    assert g["regressions"] == ["vram/reserve@0"]
    under_two = compare_gates(a, b, ["thresholds.vram_reserve_gib 3.0 -> 8.0"])
    assert under_two["regressions"] == [] and not under_two["comparable"]
    assert "first thresholds.vram_reserve_gib 3.0 -> 8.0" in under_two["why_not"]


def test_policy_differences_name_the_thresholds() -> None:
    a = {"required": ["identity/*"], "thresholds": {"vram_reserve_gib": 3.0, "x": 1}}
    b = {"required": ["identity/*"], "thresholds": {"vram_reserve_gib": 8.0, "x": 1}}
    assert policy_differences(a, b) == ["thresholds.vram_reserve_gib 3.0 -> 8.0"]
    assert policy_differences(a, a) == []


def test_answers_that_stop_matching_the_control_are_a_regression() -> None:
    """The A/B's lossless figure: identical answers 16 of 16 in A, 4 of 16 in B (speculation
    that changes outputs) is a regression of both rates; a record with no comparison has no
    cell."""
    from qualify.ab.record import Record as AbRecord
    from qualify.ab.section import diff_cells as ab_cells

    def ab(identical: int, before: int) -> AbRecord:
        got = {"pairs": 16, "identical": identical, "tokens": 4096, "tokens_before": before}
        return AbRecord.model_validate({"lossless": got})

    (cell,) = [c for c in ab_cells(ab(16, 4096)) if c.group == "lossless"]
    assert cell.measures["identical answers"].counts == (16, 16)
    a, b = {"ab": ab(16, 4096)}, {"ab": ab(4, 1800)}
    got = {c["group"]: c for c in compare_figures(a, b, 3.0, [])}
    assert got["lossless"]["measures"]["identical answers"]["verdict"] == "regression"
    assert got["lossless"]["measures"]["identical tokens"]["verdict"] == "regression"
    assert not [c for c in ab_cells(AbRecord()) if c.group == "lossless"]


def test_a_draft_acceptance_rate_is_judged_over_its_requests_not_its_tokens() -> None:
    """Two runs of one setting whose few answers differ drafted very differently (a real pair
    of context cells: 3 requests each); hundreds of tokens per answer are one trial, not
    hundreds, so this is not a regression; over 300 requests the same rates are one."""
    from qualify.present.cells import acceptance_rate

    a, b = (412, 520), (48, 444)
    few = compare_measure(acceptance_rate(*a, 3), acceptance_rate(*b, 3), 3.0)
    assert few["verdict"] != "regression", few
    assert few["units"] == [3, 3] and few["counts"] == [[412, 520], [48, 444]]
    many = compare_measure(acceptance_rate(*a, 300), acceptance_rate(*b, 300), 3.0)
    assert many["verdict"] == "regression", many
    tokens = compare_measure(
        Measure("rate", "higher", counts=a), Measure("rate", "higher", counts=b), 3.0
    )
    assert tokens["verdict"] == "regression"
    assert many["ci95"][0] < tokens["ci95"][0] < tokens["ci95"][1] < many["ci95"][1]
