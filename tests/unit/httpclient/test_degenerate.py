"""Degenerate answers are told apart from real ones, in both directions."""

from __future__ import annotations

import pytest

from qualify.httpclient.degenerate import degenerate, degenerate_verdict
from qualify.records import Verdict

REAL = [
    "The capital of France is Paris. It sits on the Seine and has been the seat of government "
    "for most of the country's history, with a population of about two million in the city.",
    "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n\n"
    "print(add(1, 2), sub(3, 1))\n",
    "- apples\n- pears\n- plums\n- cherries\n- figs\n- dates\n- grapes\n- lemons\n- limes\n",
    '{"name": "qualify", "version": 1, "stages": ["identity", "preflight", "context"], '
    '"ok": true, "count": 1000000}',
    "Short.",
]

DEGENERATE = [
    "1" + "0" * 200,
    "The answer is " + "yes " * 40,
    "I think that " + "the model the model " * 20 + "done.",
    "=" * 80 + " heading",
    "12" * 40 + " and more text after it to pass the length floor of the detector",
]


@pytest.mark.parametrize("text", REAL)
def test_real_answers_pass(text: str) -> None:
    assert degenerate(text) is None


@pytest.mark.parametrize("text", DEGENERATE)
def test_degenerate_answers_are_flagged(text: str) -> None:
    why = degenerate(text)
    assert why is not None and why.strip()


def test_the_degenerate_rule_fails_past_the_allowance_and_lists_each() -> None:
    lines = ["c1 stream 1: a run of 40 × '0'", "c2 stream 3: 'the' repeated over 90% of 40 words"]
    v, why = degenerate_verdict(lines, counted=12, allowed=1)
    assert v is Verdict.FAIL and len(why) == 2 and why[0].startswith("c1 stream 1")
    assert degenerate_verdict(lines, counted=12, allowed=2) == (Verdict.PASS, [])
    assert degenerate_verdict([], counted=12) == (Verdict.PASS, [])


def test_the_degenerate_rule_passes_nothing_on_nothing_counted() -> None:
    """A stage whose every answer failed or was excluded has not shown its answers are answers."""
    v, why = degenerate_verdict([], counted=0)
    assert v is Verdict.INCONCLUSIVE and why == ["no counted stream to read"]
