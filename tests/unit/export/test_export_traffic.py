"""`cells.csv` and `requests.csv` carry the trace replay (a row per scale, a row per replayed
request) and the agent sessions (the turns' goodput, a row per turn number, a row per turn of
each session), with the record's figures."""

from __future__ import annotations

from qualify.capacity.record import Record
from qualify.export.cells import CellRow, capacity_cells
from qualify.export.requests import capacity_requests


def _record() -> Record:
    stream = {"ttft_s": 0.5, "e2e_s": 2.0, "completion_tokens": 9, "files": ["0007-x.json"]}
    broken = {**stream, "broken": ["garbled"], "files": ["0008-x.json"]}
    turns = [
        {"session": s, "turn": t, "ttft_s": 0.1 * t, "prompt_tokens": 50 * t, "files": [f"t{t}"]}
        for s in (0, 1)
        for t in (1, 2, 3)
    ]
    turns[4]["broken"] = ["the tool result is ignored"]
    return Record.model_validate(
        {
            "load": {
                "replay": [
                    {
                        "cell": "replay-1x",
                        "scale": 1.0,
                        "requests": 2,
                        "good": 1,
                        "goodput": 0.5,
                        "offered_rps": 0.6,
                        "streams": [stream, broken],
                    },
                    {"cell": "replay-2x", "scale": 2.0, "requests": 1, "streams": [stream]},
                ],
                "sessions": {
                    "count": 2,
                    "requests": 6,
                    "good": 5,
                    "goodput": 5 / 6,
                    "broken": 1,
                    "window_s": 12.0,
                    "turns": turns,
                    "ttft_p50_s_by_turn": [0.1, 0.2, 0.3],
                    "prompt_tokens_by_turn": [50, 100, 150],
                    "cached_tokens_by_turn": [0, 48, 96],
                },
            }
        }
    )


def test_replay_and_session_cells() -> None:
    rows = list(capacity_cells(_record(), CellRow("capacity", "", "candidate", "")))
    replay = [r for r in rows if r.part == "replay"]
    assert [(r.cell, r.requests, r.goodput_ratio, r.offered_rps) for r in replay] == [
        ("replay-1x", 2, 0.5, 0.6),
        ("replay-2x", 1, None, None),
    ]
    sessions = [r for r in rows if r.part == "sessions"]
    assert [r.cell for r in sessions] == ["sessions", "turn-1", "turn-2", "turn-3"]
    assert sessions[0].goodput_ratio == 5 / 6 and sessions[0].failed == 1
    assert [(r.requests, r.failed) for r in sessions[1:]] == [(2, 0), (2, 1), (2, 0)]
    assert [r.prompt_tokens for r in sessions[1:]] == [50, 100, 150]
    assert [r.cached_tokens for r in sessions[1:]] == [0, 48, 96]


def test_a_row_per_replayed_request_and_per_turn() -> None:
    rows = list(capacity_requests(_record(), None))
    replay = [r for r in rows if r.part == "replay"]
    assert [(r.cell, r.outcome) for r in replay] == [
        ("replay-1x", "ok"),
        ("replay-1x", "broken: garbled"),
        ("replay-2x", "ok"),
    ]
    turns = [r for r in rows if r.part == "sessions"]
    assert [r.cell for r in turns] == [f"s{s}-t{t}" for s in (1, 2) for t in (1, 2, 3)]
    assert turns[4].outcome == "broken: the tool result is ignored"
    assert [r.prompt_tokens for r in turns[:3]] == [50, 100, 150]
