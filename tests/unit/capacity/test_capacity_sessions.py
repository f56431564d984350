"""Multi-turn agent sessions: each turn judged (the tool call through the server's parser, the
tool result read, the follow-up keeping it), the figures per turn as the prefix grows, and
`capacity-sessions` fed a session whose tool result is ignored (fails), a right one (passes) and
none (skipped)."""

from __future__ import annotations

from typing import Any

import pytest

from qualify.capacity import traffic_judges
from qualify.capacity.record import Record
from qualify.capacity.sessions import judge_turn, script, session_figures
from qualify.capacity.slo import SloSettings, effective
from qualify.gates.thresholds import Thresholds
from qualify.httpclient.chat import ChatOutcome, ToolCall
from qualify.records import Verdict

T = Thresholds()
P = traffic_judges.NoParams()
S = script(0)


def call(args: str, name: str = "read_metric") -> ChatOutcome:
    return ChatOutcome(tool_calls=[ToolCall(0, "c1", name, args)], finish_reason="tool_calls")


def test_the_tool_call_is_judged_through_the_servers_parser() -> None:
    assert S.host == "gpu-node-3" and S.metric == "p99_latency_ms" and S.value == 417
    right = '{"host": "gpu-node-3", "metric": "p99_latency_ms"}'
    assert judge_turn(1, S, call(right)) == []
    assert judge_turn(1, S, ChatOutcome(content="I cannot."))[0].startswith("no read_metric")
    assert "not a JSON object" in judge_turn(1, S, call('{"host": "gpu-node-3"'))[0]
    wrong = judge_turn(1, S, call('{"host": "gpu-node-9", "metric": "p99_latency_ms"}'))
    assert "asked gpu-node-3 p99_latency_ms" in wrong[0]


def test_a_session_whose_tool_result_is_ignored_fails_its_turn() -> None:
    assert judge_turn(2, S, ChatOutcome(content="The p99 latency is 417 ms.")) == []
    ignored = judge_turn(2, S, ChatOutcome(content="I will check the latency for you."))
    assert ignored[0].startswith("the tool result is ignored: the answer does not give 417")
    lost = judge_turn(3, S, ChatOutcome(content="Yes."))
    assert lost[0].startswith("the follow-up lost the value")


def turns(broken_turn2: bool = False) -> list[dict[str, Any]]:
    out = []
    for k in range(2):
        for t in (1, 2, 3):
            out.append(
                {"session": k, "turn": t, "broken": [], "files": [f"000{t}-x.json"]}
                | {"ttft_s": 0.1 * t, "e2e_s": 0.5, "prompt_tokens": 100 * t}
                | {"cached_tokens": 90 * (t - 1), "completion_tokens": 10, "decode_tok_s": 50.0}
            )
    if broken_turn2:
        out[1]["broken"] = ["the tool result is ignored: the answer does not give 417 ('…')"]
    return out


def record(broken_turn2: bool = False) -> Record:
    slo = effective(T, SloSettings(e2e_s=10.0))
    body = {"count": 2, "window_s": 3.0, **session_figures(turns(broken_turn2), slo, 3.0)}
    return Record.model_validate({"load": {"sessions": body, "slo": slo.model_dump()}})


def test_figures_per_turn_follow_the_growing_prefix() -> None:
    s = record().load.sessions
    assert s is not None
    assert s.ttft_p50_s_by_turn == pytest.approx([0.1, 0.2, 0.3])
    assert s.prompt_tokens_by_turn == [100, 200, 300]
    assert s.cached_tokens_by_turn == [0, 90, 180]
    assert (s.judged, s.broken, s.requests, s.good) == (6, 0, 6, 6)


def test_the_sessions_gate_fails_an_ignored_tool_result_and_passes_a_right_session() -> None:
    (bad,) = traffic_judges.sessions(record(broken_turn2=True), P, T)
    assert bad.verdict is Verdict.FAIL
    assert bad.reasons[0].startswith("session 1 turn 2: the tool result is ignored")
    assert "goodput of the turns 83% under the floor" in bad.reasons[-1]
    (ok,) = traffic_judges.sessions(record(), P, T)
    assert ok.verdict is Verdict.PASS, ok.reasons
    (none,) = traffic_judges.sessions(Record.model_validate({}), P, T)
    assert none.verdict is Verdict.SKIPPED


def test_the_decision_shows_the_sessions_and_diff_compares_each_turn() -> None:
    from qualify.capacity.section import diff_cells, sessions_text

    rec = record(broken_turn2=True)
    assert rec.load.sessions is not None
    text = sessions_text(rec.load.sessions, "fail")
    assert text.startswith("fail; 2 sessions × 3 turns, 5 of 6 turns right")
    assert "TTFT p50 by turn 0.10 -> 0.20 -> 0.30 s" in text
    assert "prompt tokens 100 -> 200 -> 300 (cached 0 -> 90 -> 180)" in text
    cells = {c.cell: c for c in diff_cells(rec) if c.group == "capacity sessions"}
    assert sorted(cells) == ["turn 1", "turn 2", "turn 3"]
    assert cells["turn 2"].measures["right"].counts == (1, 2)
