"""What the candidate changes against its control, read from the A/B's typed lanes."""

from __future__ import annotations

from qualify.ab.record import Lane, Speculation
from qualify.decision.causes import variable_of


def test_the_speculation_pins_that_differ_name_the_change() -> None:
    cand = Lane(name="spec", speculation=Speculation(method="ngram", draft_tokens=4))
    ctrl = Lane(name="plain", speculation=Speculation(method="none", draft_tokens=0))
    assert variable_of({"candidate": cand, "control": ctrl}) == (
        "speculation method=ngram, draft_tokens=4"
    )


def test_without_a_pin_that_differs_the_control_names_the_change() -> None:
    same = Speculation(method="none", draft_tokens=0)
    cand = Lane(speculation=same)
    ctrl = Lane(speculation=same, variable="kv cache type")
    assert variable_of({"candidate": cand, "control": ctrl}) == (
        "what its control names: kv cache type"
    )
    assert variable_of({"candidate": cand, "control": Lane(speculation=same)}) == (
        "what is not recorded"
    )


def test_a_lane_not_recorded_compares_against_nothing() -> None:
    cand = Lane(speculation=Speculation(method="none", draft_tokens=0))
    assert variable_of({"candidate": cand}) == "speculation method=none, draft_tokens=0"
    assert variable_of({}) == "what is not recorded"
