"""Every capacity judge, fed data that should pass it and data that should fail it."""

from __future__ import annotations

from typing import Any

import capacity_judging as gates

from qualify.gates.thresholds import Thresholds
from qualify.records import Verdict

T = Thresholds()


def cell(length: int, c: int, **kw: Any) -> dict[str, Any]:
    row = {
        "lane": "candidate",
        "cell": f"{length}-c{c}",
        "length": length,
        "concurrency": c,
        "aggregate_output_tok_s": 100.0,
        "decode_tok_s_p50": 50.0,
        "ttft_p95_s": 1.0,
        "failed": 0,
        "cut": 0,
        "requests": c,
        "counted_runs": 1,
        "excluded_runs": [],
        "server_ratio": 1.0,
        "idle_unknown": False,
    }
    row.update(kw)
    return row


def verdicts(found: list[Any]) -> dict[str | None, Verdict]:
    return {j.part: j.verdict for j in found}


def test_expected_range_pass_fail_and_no_range() -> None:
    data = {
        "matrix": [
            cell(256, 1, aggregate_output_tok_s=74.0),
            cell(256, 6, aggregate_output_tok_s=150.0),
        ],
        "expected": [
            {"cell": "c1", "min": 73, "max": 76},
            {"cell": "256-c6", "min": 168, "max": 180},
        ],
    }
    got = verdicts(gates.expected_range(data, gates.NoParams(), T))
    assert got == {"c1": Verdict.PASS, "256-c6": Verdict.FAIL}
    none = gates.expected_range({"matrix": data["matrix"]}, gates.NoParams(), T)
    assert none[0].verdict is Verdict.INCONCLUSIVE and "no range" in none[0].reasons[0]


def test_expected_range_on_another_metric_and_uncovered() -> None:
    data = {
        "matrix": [cell(2048, 2, ttft_p95_s=40.0)],
        "expected": [{"cell": "c2", "metric": "ttft_p95_s", "max": 30}, {"cell": "c8", "min": 1}],
    }
    got = verdicts(gates.expected_range(data, gates.NoParams(), T))
    assert got == {"c2-ttft_p95_s": Verdict.FAIL, "c8": Verdict.INCONCLUSIVE}


def test_unranged_lists_cells_without_a_range() -> None:
    matrix = [cell(256, 1), cell(256, 2)]
    bare = gates.unranged(
        {"matrix": matrix, "expected": [{"cell": "c1", "min": 1}]}, gates.NoParams(), T
    )
    assert bare[0].verdict is Verdict.INCONCLUSIVE and bare[0].metrics["no_range"] == ["256-c2"]
    full = [{"cell": "c1", "min": 1}, {"cell": "c2", "min": 1}]
    ok = gates.unranged({"matrix": matrix, "expected": full}, gates.NoParams(), T)
    assert ok[0].verdict is Verdict.PASS


def test_requests_fail_on_a_failed_or_cut_request() -> None:
    ok = gates.requests({"matrix": [cell(256, 1)]}, gates.NoParams(), T)
    assert ok[0].verdict is Verdict.PASS
    kinds = [{"kind": "json", "depth": 512, "failed": 0, "cut": 1, "requests": 3}]
    bad = gates.requests({"matrix": [cell(256, 1)], "kinds": kinds}, gates.NoParams(), T)
    assert bad[0].verdict is Verdict.FAIL and "json@512" in bad[0].reasons[0]


def test_measured_errors_on_a_cell_without_a_counted_run() -> None:
    ok = gates.measured({"matrix": [cell(256, 1)]}, gates.NoParams(), T)
    assert ok[0].verdict is Verdict.PASS
    empty = cell(256, 2, counted_runs=0, excluded_runs=[{"run": 1, "why": "not idle before"}])
    bad = gates.measured({"matrix": [cell(256, 1), empty]}, gates.NoParams(), T)
    assert bad[0].verdict is Verdict.ERROR and "not idle before" in bad[0].reasons[0]
    unknown = gates.measured({"matrix": [cell(256, 1, idle_unknown=True)]}, gates.NoParams(), T)
    assert unknown[0].verdict is Verdict.INCONCLUSIVE


def test_fidelity_per_cell_within_the_policy_tolerance() -> None:
    data = {
        "matrix": [
            cell(256, 1, server_ratio=1.01),
            cell(256, 2, server_ratio=0.9),
            cell(512, 1, server_ratio=None),
        ]
    }
    got = verdicts(gates.fidelity(data, gates.NoParams(), T))
    assert got == {"256-c1": Verdict.PASS, "256-c2": Verdict.FAIL, "512-c1": Verdict.INCONCLUSIVE}


def test_fidelity_holds_the_decode_rate_against_the_server_histograms() -> None:
    """vLLM: the cell's decode tok/s over the server's histogram figure, within tolerance."""
    data = {
        "matrix": [
            cell(256, 1, server_decode_ratio=1.02),
            cell(256, 2, server_decode_ratio=1.3),
            cell(512, 1, server_ratio=None, server_decode_ratio=0.5),
        ]
    }
    found = {j.part: j for j in gates.fidelity(data, gates.NoParams(), T)}
    assert found["256-c1"].verdict is Verdict.PASS
    assert found["256-c2"].verdict is Verdict.FAIL
    assert "histograms" in found["256-c2"].reasons[0]
    assert found["512-c1"].verdict is Verdict.FAIL


def _cmp(delta: float, ci: list[float] | None) -> dict[str, Any]:
    return {
        "cell": "256-c1",
        "metric": "aggregate_output_tok_s",
        "candidate": 100 + delta,
        "incumbent": 100.0,
        "delta_pct": delta,
        "delta_pct_ci95": ci,
        "runs": [3, 3],
    }


def test_incumbent_regression_fails_only_beyond_the_margin_and_interval() -> None:
    inc = {"status": "measured"}
    fail = gates.incumbent(
        {"incumbent": inc, "comparison": [_cmp(-10, [-12, -8])]}, gates.NoParams(), T
    )
    assert fail[0].verdict is Verdict.FAIL and fail[0].part == "256-c1"
    noisy = gates.incumbent(
        {"incumbent": inc, "comparison": [_cmp(-10, [-15, 2])]}, gates.NoParams(), T
    )
    assert noisy[0].verdict is Verdict.PASS
    small = gates.incumbent(
        {"incumbent": inc, "comparison": [_cmp(-2, [-3, -1])]}, gates.NoParams(), T
    )
    assert small[0].verdict is Verdict.PASS
    one_run = gates.incumbent(
        {"incumbent": inc, "comparison": [_cmp(-10, None)]}, gates.NoParams(), T
    )
    assert one_run[0].verdict is Verdict.INCONCLUSIVE
    strict = Thresholds(ab_max_regression_pct=1.0)
    assert (
        gates.incumbent(
            {"incumbent": inc, "comparison": [_cmp(-2, [-3, -1.5])]}, gates.NoParams(), strict
        )[0].verdict
        is Verdict.FAIL
    )


def test_incumbent_absent_is_skipped_and_unreachable_inconclusive() -> None:
    off = gates.incumbent(
        {"incumbent": {"status": "none", "why": "stages.capacity.incumbent is false"}},
        gates.NoParams(),
        T,
    )
    assert off[0].verdict is Verdict.SKIPPED and "is false" in off[0].reasons[0]
    first = gates.incumbent(
        {"incumbent": {"status": "first", "why": "alias x points at nothing"}}, gates.NoParams(), T
    )
    assert first[0].verdict is Verdict.PASS and "first qualification" in first[0].reasons[0]
    down = gates.incumbent(
        {"incumbent": {"status": "unreachable", "why": "refused"}}, gates.NoParams(), T
    )
    assert down[0].verdict is Verdict.INCONCLUSIVE


def _answered(n: int) -> list[dict[str, Any]]:
    """A matrix cell whose one run holds `n` answered streams."""
    streams = [{"failed": None, "cut": None, "files": []} for _ in range(n)]
    return [cell(256, 1, run_records=[{"label": "r1", "streams": streams}])]


def test_degenerate_answers_over_the_allowance_fail() -> None:
    found = [{"where": "256-c1", "stream": 1, "reason": "a run of 40 × '1'"}]
    ok = gates.degenerate_answers(
        {"matrix": _answered(3), "degenerate": []}, gates.DegenerateParams(), T
    )
    assert ok[0].verdict is Verdict.PASS and ok[0].metrics["streams"] == 3
    bad = gates.degenerate_answers(
        {"matrix": _answered(3), "degenerate": found}, gates.DegenerateParams(), T
    )
    assert bad[0].verdict is Verdict.FAIL and "256-c1" in bad[0].reasons[0]
    allowed = gates.degenerate_answers(
        {"matrix": _answered(3), "degenerate": found}, gates.DegenerateParams(max_answers=1), T
    )
    assert allowed[0].verdict is Verdict.PASS


def test_degenerate_with_no_counted_answer_is_inconclusive() -> None:
    """The one degenerate rule: nothing read is no pass (a stage whose streams all failed)."""
    none = gates.degenerate_answers({"degenerate": []}, gates.DegenerateParams(), T)
    assert none[0].verdict is Verdict.INCONCLUSIVE
    failed = [{"failed": "request failed: refused", "cut": None, "files": []}]
    rows = [cell(256, 1, run_records=[{"label": "r1", "streams": failed}])]
    only_failed = gates.degenerate_answers(
        {"matrix": rows, "degenerate": []}, gates.DegenerateParams(), T
    )
    assert only_failed[0].verdict is Verdict.INCONCLUSIVE


def test_engine_capacity_reported_or_not() -> None:
    ok = gates.engine(
        {"engine": {"reported": True, "kv_tokens": 8192, "engine": "llama.cpp"}},
        gates.NoParams(),
        T,
    )
    assert ok[0].verdict is Verdict.PASS and ok[0].metrics["kv_tokens"] == 8192
    none = gates.engine({"engine": {"reported": False, "engine": "vllm"}}, gates.NoParams(), T)
    assert none[0].verdict is Verdict.INCONCLUSIVE and "vllm" in none[0].reasons[0]
