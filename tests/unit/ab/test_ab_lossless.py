"""Speculation checked lossless: planted answers that diverge fail `ab/lossless` at the token
they diverge at; identical ones pass; the house's share and a sampled A/B are
honoured; nothing compared is inconclusive, never a pass."""

from __future__ import annotations

from typing import Any

from qualify.ab import lossless
from qualify.ab.lossless import Answers
from qualify.ab.record import Record, Run
from qualify.gates.thresholds import Thresholds
from qualify.httpclient.chat import ChatOutcome
from qualify.records import Verdict


def _answer(*pieces: str) -> ChatOutcome:
    """A streamed answer, one token per chunk."""
    o = ChatOutcome()
    for p in pieces:
        o.content += p
        o.content_ends.append(len(o.content))
    return o


TOKENS = ("The", " answer", " is", " forty", "-two", ".")


def _runs(failed: str | None = None) -> dict[str, list[dict[str, Any]]]:
    q = [{"prompt": "p1", "failed": None}, {"prompt": "p2", "failed": failed}]
    return {lane: [{"run": 1, "requests": q}] for lane in ("candidate", "control")}


def compare(
    answers: Answers, runs: dict[str, Any], temperature: float, with_repeats: bool = False
) -> dict[str, Any]:
    typed = {lane: [Run.model_validate(r) for r in rs] for lane, rs in runs.items()}
    return lossless.compare(answers, typed, temperature, with_repeats).model_dump()


def _answers(candidate_p2: tuple[str, ...]) -> Answers:
    return {
        ("candidate", 1, "p1"): _answer(*TOKENS),
        ("control", 1, "p1"): _answer(*TOKENS),
        ("candidate", 1, "p2"): _answer(*candidate_p2),
        ("control", 1, "p2"): _answer(*TOKENS),
    }


def _judged(got: dict[str, Any], **house: Any) -> Any:
    data = Record.model_validate(
        {"lanes": {"candidate": {}, "control": {}}, "runs": 1, "lossless": got}
    )
    return lossless.gate(data, lossless.Params(), Thresholds(**house))


def test_a_divergent_pair_is_found_at_its_token_and_fails() -> None:
    # a multi-token chunk in the candidate (a draft accepted) does not matter; the text does
    got = compare(_answers(("The answer", " is", " forty", " two", ".")), _runs(), 0.0)
    assert got["pairs"] == 2 and got["identical"] == 1
    assert got["tokens"] == 12 and got["tokens_before"] == 6 + 4
    (d,) = got["divergent"]
    assert (d["run"], d["prompt"], d["token"], d["of"]) == (1, "p2", 4, 6)
    assert d["control"].startswith("-two") and d["candidate"].startswith(" two")
    (j,) = _judged(got)
    assert j.verdict is Verdict.FAIL
    assert "1 of 2 pairs differ" in j.reasons[0]
    assert "prompt p2: the answers differ from token 4 of 6" in j.reasons[1]
    assert j.metrics["identical_token_share"] == 10 / 12


def test_identical_answers_pass_and_a_late_divergence_is_allowed_by_the_house() -> None:
    same = compare(_answers(TOKENS), _runs(), 0.0)
    assert same["identical"] == same["pairs"] == 2 and same["divergent"] == []
    assert _judged(same)[0].verdict is Verdict.PASS
    late = compare(_answers((*TOKENS[:5], "!")), _runs(), 0.0)  # 11 of 12 tokens before it
    assert _judged(late)[0].verdict is Verdict.FAIL
    assert _judged(late, lossless_min_share=0.9)[0].verdict is Verdict.PASS
    assert _judged(late, lossless_min_share=0.95)[0].verdict is Verdict.FAIL


def test_failed_requests_are_not_compared_and_nothing_compared_is_inconclusive() -> None:
    got = compare(_answers(("Something", " else")), _runs(failed="cut"), 0.0)
    assert got["pairs"] == 1 and got["divergent"] == []
    sampled = compare(_answers(TOKENS), _runs(), 0.7)
    (j,) = _judged(sampled)
    assert j.verdict is Verdict.INCONCLUSIVE and "temperature 0.7" in j.reasons[0]
    none = compare({}, {"candidate": [], "control": []}, 0.0)
    assert _judged(none)[0].verdict is Verdict.INCONCLUSIVE
    (old,) = lossless.gate(
        Record.model_validate({"lanes": {"candidate": {}, "control": {}}}),
        lossless.Params(),
        Thresholds(),
    )
    assert old.verdict is Verdict.INCONCLUSIVE


def _two_runs(control_run2_p2: tuple[str, ...], candidate_run2_p2: tuple[str, ...]) -> Any:
    q = [{"prompt": "p1", "failed": None}, {"prompt": "p2", "failed": None}]
    runs = {lane: [{"run": r, "requests": q} for r in (1, 2)] for lane in ("candidate", "control")}
    answers = _answers(TOKENS) | {
        ("candidate", 2, "p1"): _answer(*TOKENS),
        ("control", 2, "p1"): _answer(*TOKENS),
        ("candidate", 2, "p2"): _answer(*candidate_run2_p2),
        ("control", 2, "p2"): _answer(*control_run2_p2),
    }
    return compare(answers, runs, 0.0, with_repeats=True)


def test_a_divergence_with_a_deterministic_control_is_laid_on_speculation() -> None:
    """The control answers each prompt the same in every run; the candidate departs from it in
    run 2: speculation changed the answer, and the gate fails."""
    got = _two_runs(TOKENS, ("The", " answer", " is", " four", "."))
    assert got["repeats"] == {
        "candidate": {"pairs": 2, "identical": 1},
        "control": {"pairs": 2, "identical": 2},
    }
    (j,) = _judged(got)
    assert j.verdict is Verdict.FAIL and "1 of 4 pairs differ" in j.reasons[0]


def test_a_control_that_answers_two_ways_makes_a_divergence_inconclusive() -> None:
    """The control itself answers p2 differently in run 2 (the server is not deterministic at
    temperature 0): a difference between the lanes cannot be laid on speculation."""
    other = ("The", " answer", " is", " four", ".")
    got = _two_runs(other, TOKENS)
    assert got["repeats"]["control"] == {"pairs": 2, "identical": 1}
    (j,) = _judged(got)
    assert j.verdict is Verdict.INCONCLUSIVE
    assert "control's own answers differ between its runs (1 of 2 repeats)" in j.reasons[0]
    assert j.metrics["control_identical"] == 1


def test_a_record_made_before_repeats_is_compared_as_it_was() -> None:
    got = compare(_answers(TOKENS), _runs(), 0.0)
    assert "repeats" not in got
    assert (
        "repeats"
        not in Record.model_validate({"lanes": {}, "runs": 1, "lossless": got}).model_dump(
            mode="json"
        )["lossless"]
    )
