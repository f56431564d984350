"""The words the decision uses for a difference follow its interval: a direction only when the
whole interval excludes zero (or the margin), intervals on both sides of zero say so."""

from __future__ import annotations

import pytest

from qualify.shown import direction, say, speed_title


@pytest.mark.parametrize(
    ("lo", "hi", "margin", "want"),
    [
        (1.0, 5.0, 0.0, "up"),
        (-5.0, -1.0, 0.0, "down"),
        (-11.8, 12.3, 0.0, None),
        (1.0, 5.0, 3.0, None),
        (4.0, 5.0, 3.0, "up"),
        (-5.0, -4.0, 3.0, "down"),
        (0.0, 5.0, 0.0, None),
        (None, 5.0, 0.0, None),
        (5.0, 1.0, 0.0, "up"),
    ],
)
def test_a_direction_only_beyond_zero_or_the_margin(
    lo: float | None, hi: float | None, margin: float, want: str | None
) -> None:
    assert direction(lo, hi, margin) == want


def test_words_name_the_interval_when_it_spans_zero() -> None:
    assert say(2.0, 9.0, "faster", "slower") == "faster"
    assert say(-9.0, -2.0, "faster", "slower") == "slower"
    spans = say(-11.8, 12.3, "faster", "slower")
    assert spans == "no difference shown (95% interval -11.8% to +12.3%)"
    assert say(None, None, "more", "less") == "no difference shown (no interval)"


def test_the_speed_cause_says_slower_only_when_shown() -> None:
    assert speed_title(-9.0, -2.0) == "the change is slower than the control"
    assert speed_title(-11.8, 12.3) == "the change is not shown faster than the control"
    assert speed_title(None, None) == "the change is not shown faster than the control"
    assert speed_title(0.5, 3.0).startswith("the change is faster than the control, by less")
