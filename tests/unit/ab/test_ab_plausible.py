"""The advisory checks of A/B figures the evidence contradicts: each fed data that must fail it
and data that must pass it."""

from __future__ import annotations

from typing import Any

from qualify.ab.plausible import OutlierParams, OverrunParams, decode_outliers, draft_overrun
from qualify.ab.record import Record
from qualify.gates.files import default_gates_dir, load_gates
from qualify.gates.thresholds import Thresholds
from qualify.records import Verdict

T = Thresholds()


def _request(prompt: str, decode: float, **over: Any) -> dict[str, Any]:
    return {"prompt": prompt, "decode_tok_s": decode, **over}


def _data(cand_decode: list[float], accepted: int = 30, drafts: int = 10) -> Record:
    spec = {"method": "ngram-mod", "draft_tokens": 4}
    acc = {"drafts": drafts, "accepted": accepted, "draft_tokens": 4 * drafts, "source": "s"}
    return Record.model_validate(
        {
            "runs": 1,
            "lanes": {
                "candidate": {
                    "speculation": spec,
                    "acceptance": acc,
                    "figure": {"decode_tok_s": 100.0},
                    "runs": [
                        {
                            "run": 1,
                            "requests": [_request(f"p{i}", d) for i, d in enumerate(cand_decode)],
                        }
                    ],
                },
                "control": {
                    "speculation": {"method": "none"},
                    "figure": {"decode_tok_s": 50.0},
                    "runs": [{"run": 1, "requests": [_request("p0", 51.0)]}],
                },
            },
        }
    )


def test_the_gate_files_declare_both_checks_advisory() -> None:
    loaded, problems = load_gates(default_gates_dir(), "ab")
    assert problems == []
    by = {g.gate.check: g.gate for g in loaded}
    assert by["ab-draft-overrun"].severity == "advisory"
    assert by["ab-decode-outliers"].severity == "advisory"


def test_more_accepted_per_draft_than_the_pinned_length_fails() -> None:
    [j] = draft_overrun(_data([100.0], accepted=60, drafts=10), OverrunParams(), T)
    assert (j.part, j.verdict) == ("candidate", Verdict.FAIL)
    assert "6.0 accepted tokens per draft, more than the pinned draft length of 4" in j.reasons[0]


def test_accepted_within_the_pinned_length_passes() -> None:
    [j] = draft_overrun(_data([100.0], accepted=30, drafts=10), OverrunParams(), T)
    assert j.verdict is Verdict.PASS and j.metrics["accepted_per_draft"] == 3.0


def test_no_counted_drafts_is_inconclusive_and_no_drafting_lane_skipped() -> None:
    [j] = draft_overrun(_data([100.0], accepted=0, drafts=0), OverrunParams(), T)
    assert j.verdict is Verdict.INCONCLUSIVE
    data = _data([100.0])
    data.lanes["candidate"].speculation.method = "none"
    [j] = draft_overrun(data, OverrunParams(), T)
    assert j.verdict is Verdict.SKIPPED


def test_a_request_above_twice_the_lane_median_fails() -> None:
    cand, ctrl = decode_outliers(_data([100.0, 90.0, 250.0]), OutlierParams(), T)
    assert (cand.part, cand.verdict) == ("candidate", Verdict.FAIL)
    assert "1 request(s) decoded above 2 times the lane's median of 100.0" in cand.reasons[0]
    assert "run 1 p2" in cand.reasons[0]
    assert (ctrl.part, ctrl.verdict) == ("control", Verdict.PASS)


def test_requests_near_the_median_pass_and_left_out_ones_are_not_counted() -> None:
    data = _data([100.0, 190.0])
    data.lanes["candidate"].runs[0].requests.append(
        Record.model_validate(
            {"lanes": {"candidate": {"runs": [{"run": 1, "requests": [_request("d", 900.0)]}]}}}
        )
        .lanes["candidate"]
        .runs[0]
        .requests[0]
        .model_copy(update={"degenerate": "a run of 60 digits"})
    )
    cand, _ = decode_outliers(data, OutlierParams(), T)
    assert cand.verdict is Verdict.PASS
    [_, ctrl] = decode_outliers(data, OutlierParams(factor=1.01), T)
    assert ctrl.verdict is Verdict.FAIL
