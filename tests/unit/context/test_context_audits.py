"""The context audits on hand-built data: RULER-style tasks and their checks, the garble sweep
over every answer of a rung, the deep tool battery; each gate seen failing and passing."""

from __future__ import annotations

import json
import random
from typing import Any

from qualify.context.battery import RESULT, judge_case
from qualify.context.corpus import Needles, Source, document, messages
from qualify.context.judges import (
    GarbleParams,
    TasksParams,
    ToolsParams,
    deep_tools,
    garbled,
    tasks,
)
from qualify.context.record import Case, Record
from qualify.context.tasks import (
    TASK_KINDS,
    Tasks,
    combined_question,
    first_number,
    judge_combined,
    numbered,
)
from qualify.gates.files import default_gates_dir
from qualify.gates.runner import judge_stage
from qualify.gates.thresholds import Thresholds

T = Thresholds()


def _tasks(seed: int = 7) -> Tasks:
    return Tasks.draw(random.Random(seed), list(TASK_KINDS), set())


def _right(t: Any) -> str:
    """An answer that gets task `t` right."""
    if t.kind == "aggregation":
        return f"{t.count} crates."
    return ", ".join(t.expect)


# the tasks themselves


def test_five_kinds_each_spread_over_two_depths_or_more() -> None:
    ts = _tasks()
    assert [t.kind for t in ts.items] == list(TASK_KINDS)
    assert all(len(t.depths) >= 2 for t in ts.items), [t.depths for t in ts.items]
    needles = Needles.draw(random.Random(1))
    doc = document(Source("prose", 1), 20000, needles, ts.lines())
    for t in ts.items:
        for _, line in t.lines:
            assert line in doc.body
    first_lines = [line for _, line in ts.items[0].lines]
    positions = [doc.body.find(line) for line in first_lines]
    assert positions == sorted(positions), "lines keep their depth order"
    assert doc.depths["50"] < doc.depths["99"]


def test_each_check_passes_the_right_answer_and_fails_a_wrong_one() -> None:
    for t in _tasks().items:
        assert t.check(_right(t)).passed, t.kind
        assert not t.check("I do not know.").passed, t.kind
    mk, mv, vt, cw, agg = _tasks().items
    assert not mk.check(mk.expect[0]).passed, "one key of two is not enough"
    assert not mv.check(", ".join(mv.expect[:2])).passed, "every value is asked"
    decoy = vt.forbid[0]
    assert vt.check(", ".join(vt.expect)).passed
    wrong = vt.check(", ".join([*vt.expect, decoy]))
    assert not wrong.passed and wrong.wrong == [decoy], "a decoy named fails"
    assert not cw.check(" ".join(cw.expect[:2])).passed
    assert agg.count is not None
    assert not agg.check(f"{agg.count + 1} crates, not {agg.count}").passed, "first number"
    words = {3: "three", 4: "four", 5: "five", 6: "six"}
    assert agg.check(f"There were {words[agg.count]} crates.").passed


def test_values_names_and_words_never_occur_in_the_corpus() -> None:
    from qualify.context.corpus import KINDS, text

    corpus = "".join(text(k) for k in KINDS).lower()
    for seed in range(20):
        for t in _tasks(seed).items:
            for v in [*t.expect, *t.forbid]:
                assert v.lower() not in corpus, (t.kind, v)


def test_combined_answers_are_judged_by_their_numbers() -> None:
    ts = _tasks()
    needles = Needles.draw(random.Random(2))
    q = combined_question(needles.ask, ts)
    assert q.splitlines()[1].startswith("1. What are the vault code")
    assert len(q.splitlines()) == 1 + 1 + len(ts.items)
    answer = "1. 11111 and 22222\n" + "\n".join(
        f"{i}. {_right(t)}" for i, t in enumerate(ts.items, 2)
    )
    assert set(numbered(answer)) == set(range(1, 7))
    judged = judge_combined(answer, ts)
    assert all(j.passed and j.numbered for j in judged.values()), judged
    # The aggregation count given to the wrong question does not count for it.
    shifted = answer.replace(f"6. {_right(ts.items[4])}", "6. none")
    assert not judge_combined(shifted, ts)["aggregation"].passed
    unnumbered = judge_combined("no idea", ts)
    assert not any(j.numbered or j.passed for j in unnumbered.values())
    assert first_number("About 4, maybe 5") == 4


# gates over stage data


def _rung(target: int = 4096, planned: int = 4096, **kw: Any) -> dict[str, Any]:
    return {
        "target": target,
        "planned_tokens": planned,
        "clamped": False,
        "window": 8192,
        "errors": [],
        "same_as": None,
        **kw,
    }


def _row(pass_: str, answer: str, checks: dict[str, Any]) -> dict[str, Any]:
    return {
        "target": 4096,
        "planned_tokens": 4096,
        "pass": pass_,
        "content": "prose",
        "concurrency": 1,
        "verdict": "pass",
        "streams": [{"problem": None, "answer": answer, "tasks": checks}],
    }


def _audited(cold_agg: bool = True, garble: str = "") -> dict[str, Any]:
    ts = _tasks()
    right = {t.kind: {**t.check(_right(t)).model_dump(), "numbered": True} for t in ts.items}
    cold = dict(right)
    if not cold_agg:
        cold["aggregation"] = {"passed": False, "said": 9, "expected": 4, "numbered": True}
    asked = [
        {"kind": t.kind, "problem": None, "answer": _right(t), "check": t.check(_right(t))}
        for t in ts.items
    ]
    warmups = [{"n": 1, "answer": "fine"}, {"n": 2, "answer": garble or "fine"}]
    contents = {"prose": {"tasks": list(ts.items), "asked": asked, "warmups": warmups}}
    return {
        "targets": [_rung(contents=contents)],
        "rows": [_row("warm", "fine", right), _row("cold", "fine", cold)],
    }


def test_tasks_gate_passes_every_kind_right_cold_and_warm() -> None:
    (j,) = tasks(Record.model_validate(_audited()), TasksParams(), T)
    assert j.verdict == "pass" and j.part == "4096", j.reasons


def test_tasks_gate_fails_one_wrong_cold_count() -> None:
    (j,) = tasks(Record.model_validate(_audited(cold_agg=False)), TasksParams(), T)
    assert j.verdict == "fail"
    assert j.reasons == [
        "cold prose c=1 stream 1 (numbered answer): aggregation counted 9, expected 4"
    ]


def test_tasks_gate_a_rung_without_tasks_is_inconclusive_saying_why() -> None:
    why = "no tasks at 512 tokens: their lines and questions take about 300 tokens"
    data = {
        "targets": [_rung(512, 512, contents={"prose": {"tasks_note": why}})],
        "rows": [],
    }
    (j,) = tasks(Record.model_validate(data), TasksParams(), T)
    assert j.verdict == "inconclusive" and why in j.reasons[-1]


def test_garble_gate_judges_every_answer_of_the_rung() -> None:
    (j,) = garbled(Record.model_validate(_audited()), GarbleParams(), T)
    assert j.verdict == "pass" and j.metrics["answers"] == 2 + 2 + 5
    (j,) = garbled(Record.model_validate(_audited(garble="0" * 40)), GarbleParams(), T)
    assert j.verdict == "fail"
    assert j.reasons == ["prose warm-up 2: character '0' repeated 40 times in a row (limit 17)"]
    (j,) = garbled(Record.model_validate(_audited(garble="ok <|im_end|>")), GarbleParams(), T)
    assert j.verdict == "fail" and "special tokens" in j.reasons[0]


def _tools() -> list[dict[str, Any]]:
    return json.loads((default_gates_dir() / "schemas/tools/three-typed-tools.json").read_text())


def _case(case: str, **kw: Any) -> dict[str, Any]:
    call = {
        "index": 0,
        "id": "call_1",
        "name": "book_table",
        "arguments": json.dumps(
            {
                "restaurant": "Chez Lune",
                "party_size": 4,
                "contact": {"name": "Ada", "phone": "555-0101"},
            }
        ),
    }
    rec = {
        "case": case,
        "problem": None,
        "http_status": 200,
        "finish_reason": "tool_calls",
        "tool_calls": [call],
        "answer": "",
        "files": [],
    }
    if case == "tool-result":
        rec.update(tool_calls=[], finish_reason="stop", answer="It is 13.4 C in Paris.")
    return {**rec, **kw}


def _battery(*cases: dict[str, Any]) -> dict[str, Any]:
    return {
        "targets": [_rung()],
        "rows": [],
        "battery": {
            "target": 4096,
            "planned_tokens": 4096,
            "tools": _tools(),
            "cases": list(cases),
            "errors": [],
        },
    }


def test_deep_tools_pass_a_valid_call_a_streamed_one_and_a_used_result() -> None:
    data = _battery(_case("typed"), _case("streaming"), _case("tool-result"))
    for case in ("typed", "streaming", "tool-result"):
        (j,) = deep_tools(Record.model_validate(data), ToolsParams(case=case), T)  # type: ignore[arg-type]
        assert j.verdict == "pass" and j.part == "4096", (case, j.reasons)


def test_deep_tools_fail_on_the_wrong_data() -> None:
    bad_args = _case("typed", tool_calls=[{**_case("typed")["tool_calls"][0], "arguments": "{"}])
    no_call = _case("typed", tool_calls=[], finish_reason="length", answer="Sure! Booking now.")
    no_id = _case("streaming", tool_calls=[{**_case("typed")["tool_calls"][0], "id": None}])
    ignored = _case("tool-result", answer="I cannot check the weather.")
    echoed = _case("tool-result", answer=f"<tool_response>{RESULT}</tool_response> 13.4")
    for rec, want in (
        (bad_args, "arguments are not JSON"),
        (no_call, "no tool call (finish_reason=length"),
        (no_id, "no id in any of its deltas"),
        (ignored, "does not contain '13.4'"),
        (echoed, "echoes tool markup"),
    ):
        (j,) = deep_tools(Record.model_validate(_battery(rec)), ToolsParams(case=rec["case"]), T)
        assert j.verdict == "fail" and any(want in r for r in j.reasons), (want, j.reasons)
    rejected = _case("typed", http_status=400)
    (j,) = deep_tools(Record.model_validate(_battery(rejected)), ToolsParams(case="typed"), T)
    assert j.verdict == "fail" and "HTTP 400 at 4096 tokens" in j.reasons[0]
    broken = _case("typed", problem="request failed: timeout")
    (j,) = deep_tools(Record.model_validate(_battery(broken)), ToolsParams(case="typed"), T)
    assert j.verdict == "error"
    (j,) = deep_tools(
        Record.model_validate({"targets": [], "rows": [], "battery": None}),
        ToolsParams(case="typed"),
        T,
    )
    assert j.verdict == "inconclusive"
    assert judge_case(Case.model_validate(_case("typed")), _tools()) == []


def test_the_declared_gate_files_load_and_judge_the_audits() -> None:
    """gates/context/*.yaml declare the new gates; the runner judges them over stage data."""
    data = {**_audited(), **{"battery": _battery(_case("typed"))["battery"]}}
    data.update(fidelity={}, degenerate=[])
    gates, problems = judge_stage("context", default_gates_dir(), data, T)
    assert problems == []
    by = {g.gate: g.verdict for g in gates}
    assert by["ruler@4096"] == "pass" and by["garble@4096"] == "pass"
    assert by["deep-typed-tools@4096"] == "pass"
    assert by["deep-tool-result@4096"] == "inconclusive", "not asked in this data"


def test_the_needles_question_stays_when_no_task_is_asked() -> None:
    needles = Needles.draw(random.Random(3))
    doc = document(Source("prose", 1), 2000, needles)
    msgs = messages(doc, needles, "abcd")
    assert msgs[1]["content"].endswith(needles.question)
