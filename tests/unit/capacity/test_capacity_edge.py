"""The incumbent at the candidate's edge (`qualify.capacity.edge`): which of the candidate's steps
it repeats and with which seed, and how the two lanes are set side by side (the decision's
rendering of them: tests/unit/decision/test_decision_load.py)."""

from __future__ import annotations

from typing import Any

import pytest

from qualify.capacity.edge import PREFIX, edge_steps, held, versus
from qualify.capacity.loads import Knee, OpenCell


def _step(rate: float, step: int, goodput: float, pace: float | None) -> dict[str, Any]:
    return {
        "cell": f"poisson-{rate:.4g}rps",
        "arrival": "poisson",
        "rate_rps": rate,
        "step": step,
        "goodput": goodput,
        "pace": pace,
        "requests": 8,
        "achieved_rps": rate * (pace or 1.0),
    }


# A search from 8 req/s: 8 held, 16 did not (pace), 11.3 held (the bisection), then a burst.
SEARCH = [
    _step(8.0, 1, 1.0, 0.97),
    _step(16.0, 2, 1.0, 0.55),
    _step(11.3, 3, 1.0, 0.95),
    {"cell": "burst-32", "arrival": "burst", "rate_rps": None, "goodput": 1.0},
]
KNEE = Knee(rate_rps=11.3, cell="poisson-11.3rps", first_over=16.0, goodput_floor=0.9)


def test_the_edge_is_the_knee_then_the_first_rate_over_it_with_their_step_index() -> None:
    assert edge_steps(_cells(SEARCH), KNEE) == [(11.3, 2), (16.0, 1)]


def test_no_search_no_knee_or_no_rate_over_give_what_there_is() -> None:
    assert edge_steps(_cells(SEARCH), None) == []
    assert edge_steps([], KNEE) == []
    bounded = KNEE.model_copy(update={"first_over": None})
    assert edge_steps(_cells(SEARCH), bounded) == [(11.3, 2)]
    nothing_held = Knee(rate_rps=None, first_over=8.0, goodput_floor=0.9)
    assert edge_steps(_cells(SEARCH[:1]), nothing_held) == [(8.0, 0)]


def _cells(rows: list[dict[str, Any]], prefix: str = "") -> list[OpenCell]:
    return [OpenCell.model_validate({**r, "cell": prefix + r["cell"]}) for r in rows]


@pytest.mark.parametrize(
    ("incumbent", "lead"),
    [
        # the incumbent kept pace at 16 req/s where the candidate fell behind
        ([_step(11.3, 3, 1.0, 0.96), _step(16.0, 2, 1.0, 0.93)], "incumbent held"),
        # the incumbent missed the floor at the candidate's knee
        ([_step(11.3, 3, 0.5, 0.99), _step(16.0, 2, 0.4, 0.5)], "candidate held"),
        # the same on both lanes: no lead
        ([_step(11.3, 3, 1.0, 0.94), _step(16.0, 2, 1.0, 0.6)], None),
    ],
)
def test_versus_names_a_rate_one_lane_held_and_the_other_did_not(
    incumbent: list[dict[str, Any]], lead: str | None
) -> None:
    rows = versus(_cells(SEARCH[:3]), _cells(incumbent, PREFIX), 0.9)
    assert [inc.rate_rps for _, inc, _ in rows] == [11.3, 16.0]
    assert held(rows[0][0], 0.9) and not held(rows[1][0], 0.9)
    leads = [lead for _, _, lead in rows if lead]
    if lead is None:
        assert leads == []
    else:
        assert len(leads) == 1 and leads[0].startswith(f"the {lead}")


def test_a_harness_error_is_never_held() -> None:
    late = {**_step(16.0, 2, 1.0, 0.99), "harness_error": "p99 send lag 900 ms > 200 ms"}
    rows = versus(_cells(SEARCH[:3]), _cells([late], PREFIX), 0.9)
    assert held(rows[0][1], 0.9) is False and rows[0][2] is None
