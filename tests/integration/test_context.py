"""The context ladder against the real local llama-server.

The server runs with a 2,048-token window so that the second target (4,096) must clamp and the
ladder stays lean on a shared 2-core machine. One ladder run serves every test here: needles
and the RULER-style tasks at every rung, the garble sweep over every answer, and the tool
battery at the deepest rung through llama-server's own tool parser.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from qualify.context.corpus import Needles
from qualify.context.record import NeedleInfo
from qualify.records import StageResult, Verdict

pytestmark = pytest.mark.integration

_RESULT: dict[str, tuple[StageResult, Path]] = {}
TARGETS = [1024, 4096]  # 1024: the smallest rung that holds the five tasks; 4096 clamps
WINDOW = 2048
MARGIN = 128
MAX_TOKENS = 96  # room for the numbered answers to six questions
SIZES = [1024, WINDOW - MARGIN]  # the size each target ran at: gates are named by it
KINDS = ["multi-key", "multi-value", "variable-tracking", "common-words", "aggregation"]


@pytest.fixture
def ladder(candidate_factory: Callable[..., Path], stage_runner: Any) -> tuple[StageResult, Path]:
    """One ladder run at two sizes (the last clamps), kept for every test of this module."""
    if "run" not in _RESULT:
        cand = candidate_factory(
            18201,
            stages=["context"],
            replace={
                '"-c", "8192"': f'"-c", "{WINDOW}"',
                "targets = [1024, 4096]": f"targets = {TARGETS}",
                "completion_margin = 256": f"completion_margin = {MARGIN}",
                "max_tokens = 64\nwarmups": f"max_tokens = {MAX_TOKENS}\nwarmups",
            },
        )
        runner = stage_runner(cand)
        result = runner.stage("context")
        _RESULT["run"] = (result, runner.run.path / "context" / "attempt-001")
    return _RESULT["run"]


def _rows(result: StageResult, pass_: str) -> list[dict[str, Any]]:
    return [r for r in result.data["rows"] if r["pass"] == pass_]


def test_two_sizes_one_clamped_planned_and_actual_recorded(
    ladder: tuple[StageResult, Path],
) -> None:
    """Each target is planned (the last clamped to the window minus the margin), sized with the
    server's tokenizer in a handful of calls; warm and cold prompts alike (the cold ones behind
    a new nonce, re-counted) have exactly the sized tokens in usage."""
    result, _ = ladder
    targets = result.data["targets"]
    assert [(t["target"], t["planned_tokens"], t["clamped"]) for t in targets] == [
        (TARGETS[0], SIZES[0], False),
        (TARGETS[1], WINDOW - MARGIN, True),
    ]
    assert all(t["window"] == WINDOW for t in targets)
    for row in result.data["rows"]:
        assert row["verdict"] != "error", row["reasons"]
        planned, actual = row["planned_tokens"], row["actual_prompt_tokens"]
        assert planned - 8 <= row["sized_tokens"] <= planned, row
        assert actual == row["sized_tokens"], row
        assert row["completion_tokens"] and row["completion_tokens"] <= MAX_TOKENS
        assert row["ttfo_s"] > 0
        # A row whose every answer is degenerate has no decode figures (docs/context.md).
        assert row["e2e_s"] >= row["ttfo_s"] if not row["degenerate"] else True
    calls = result.data["tokenizer_calls"]
    assert all(1 <= calls[str(t)] <= 8 for t in TARGETS), calls
    assert result.data["sizing_method"] == "apply-template+tokenize"


def test_cold_pass_misses_the_prefix_cache_and_warm_hits_it(
    ladder: tuple[StageResult, Path],
) -> None:
    """The cold prompt, new nonce first, reuses only the role header (server cache_n and the
    cached-token counter both near zero); the warm prompt is served from the cache."""
    result, _ = ladder
    for row in _rows(result, "cold"):
        assert row["cached_tokens"] <= 8, row
        assert row["cached_tokens_metric_delta"] <= 8, row
    for row in _rows(result, "warm"):
        assert row["cached_tokens"] >= row["actual_prompt_tokens"] - 2, row
        assert row["cached_tokens_metric_delta"] >= row["actual_prompt_tokens"] - 2, row
    for size in SIZES:
        gate = next(g for g in result.gates if g.gate == f"cold-cache@{size}")
        assert gate.verdict is Verdict.PASS, gate.reasons


def test_needles_judged_honestly_with_the_answer_kept(ladder: tuple[StageResult, Path]) -> None:
    """Each needles gate passes only when both numbers are in every answer; the answers are in
    the row and in the kept exchange, and the verdict agrees with them."""
    result, attempt = ladder
    for t, size in zip(TARGETS, SIZES, strict=True):
        gate = next(g for g in result.gates if g.gate == f"needles@{size}")
        assert gate.metrics["target"] == t and gate.metrics["clamped"] is (t != size)
        rows = [r for r in result.data["rows"] if r["target"] == t]
        sizing = json.loads((attempt / f"sizing-{t}-prose.json").read_text())
        needles = Needles(tuple(NeedleInfo(**n) for n in sizing["needles"]))  # type: ignore[arg-type]
        both = all(all(needles.found(r["answer"]).values()) for r in rows)
        assert gate.verdict is (Verdict.PASS if both else Verdict.FAIL), gate.reasons
        for row in rows:
            assert row["needles"] == needles.found(row["answer"])
            kept = (attempt / row["streams"][0]["files"][0]).read_text()
            words = re.findall(r"\w+", row["answer"])
            assert all(w in kept for w in words[:5])


def test_engine_idle_around_every_cell(ladder: tuple[StageResult, Path]) -> None:
    """The idle gate read llama-server's gauges before and after every timed cell."""
    result, _ = ladder
    gate = next(g for g in result.gates if g.gate == "idle")
    assert gate.verdict is Verdict.PASS, gate.reasons
    assert gate.metrics["checks"] == 2 * len(result.data["rows"])


def test_every_declared_gate_judged_and_named_by_the_size_run(
    ladder: tuple[StageResult, Path],
) -> None:
    """The gates are those `gates/context/` declares: rung gates carry the size that ran (the
    clamped one says its target), fidelity is judged per concurrency from the server's own
    timings, and degenerate answers are listed, never counted as speed."""
    result, _ = ladder
    names = {g.gate for g in result.gates}
    per_rung = ("needles", "cold-cache", "ruler", "garble")
    rungs = {f"{g}@{size}" for g in per_rung for size in SIZES}
    deep = {f"{g}@{SIZES[-1]}" for g in ("deep-typed-tools", "deep-streaming-tools")}
    deep.add(f"deep-tool-result@{SIZES[-1]}")
    # acceptance at depth: one verdict per rung deeper than the shallowest
    depth = {f"acceptance-depth@{size}" for size in SIZES[1:]}
    assert names == rungs | deep | depth | {"idle", "fidelity@c=1", "degenerate"}
    clamped = next(g for g in result.gates if g.gate == f"needles@{SIZES[-1]}")
    assert clamped.reasons[0].startswith(f"target {TARGETS[-1]}, clamped to {SIZES[-1]}")
    fid = next(g for g in result.gates if g.gate == "fidelity@c=1")
    assert fid.verdict in (Verdict.PASS, Verdict.FAIL), fid.reasons  # the server reported both
    assert fid.metrics["n_decode"] > 0 and fid.metrics["n_ttft"] > 0
    flagged = {(d["target"], d["pass"]) for d in result.data["degenerate"]}
    for row in result.data["rows"]:
        assert ((row["target"], row["pass"]) in flagged) is bool(row["degenerate"])
    speed = result.data["speed"]
    assert speed["cold"]["streams"] == len(TARGETS)
    assert speed["cold"]["degenerate_left_out"] == sum(
        d["pass"] == "cold" for d in result.data["degenerate"]
    )


def test_warmups_kept_not_counted(ladder: tuple[StageResult, Path]) -> None:
    """Two warm-ups per size are kept as evidence and are not rows."""
    result, attempt = ladder
    for t in result.data["targets"]:
        warmups = t["contents"]["prose"]["warmups"]
        assert len(warmups) == 2 and all(w["problem"] is None for w in warmups)
        assert all((attempt / w["files"][0]).exists() for w in warmups)
    assert len(result.data["rows"]) == 2 * len(TARGETS)
    fid = result.data["fidelity"]
    assert fid["n"] > 0 and fid["ttft_minus_server_prompt_ms_median"] is not None
    assert fid["by_concurrency"]["1"]["requests"] == len(result.data["rows"])


def test_tasks_hidden_at_every_rung_judged_cold_and_warm_apart(
    ladder: tuple[StageResult, Path],
) -> None:
    """Five RULER-style kinds at every rung, each over two depths or more of the document; the
    warm and cold cells answer all of them numbered, and each is asked again on its own behind
    the cached document. Every published count and every ruler verdict follows from the
    recorded checks of the answers, and the kept exchanges hold those answers."""
    result, attempt = ladder
    by_kind = result.data["audits"]["by_kind"]
    for t, size in zip(TARGETS, SIZES, strict=True):
        info = next(x for x in result.data["targets"] if x["target"] == t)["contents"]["prose"]
        assert [k["kind"] for k in info["tasks"]] == KINDS
        assert all(len(k["depths"]) >= 2 for k in info["tasks"])
        asked = info["asked"]
        assert [a["kind"] for a in asked] == KINDS and all(a["problem"] is None for a in asked)
        for a in asked:
            kept = json.loads((attempt / a["files"][0]).read_text())
            assert f"task-{a['kind']}" in a["files"][0] and kept["response"]["status"] == 200
            # Behind the warm document: the server reused the cached prefix.
            assert a["cached_tokens"] >= 0.8 * size, a
        rows = {
            (e["kind"], e["pass"], e["form"]): e for e in by_kind if e["planned_tokens"] == size
        }
        for kind in KINDS:
            for key in ((kind, "warm", "combined"), (kind, "cold", "combined")):
                assert rows[key]["asked"] == 1, (size, key)
            assert rows[(kind, "warm", "own question")]["asked"] == 1
        gate = next(g for g in result.gates if g.gate == f"ruler@{size}")
        all_right = all(e["passed"] == e["asked"] for e in rows.values())
        assert gate.verdict is (Verdict.PASS if all_right else Verdict.FAIL), gate.reasons
        cold = [r for r in result.data["rows"] if r["target"] == t and r["pass"] == "cold"]
        assert set(cold[0]["streams"][0]["tasks"]) == set(KINDS)


def test_garble_judged_on_every_answer_of_every_rung(ladder: tuple[StageResult, Path]) -> None:
    """Warm-ups, warm and cold cells, the five tasks, and at the deepest rung the battery's
    visible answers: all of them read by the garble detector, rung by rung."""
    from qualify.preflight.checks.text import garble

    result, _ = ladder
    for t, size in zip(TARGETS, SIZES, strict=True):
        info = next(x for x in result.data["targets"] if x["target"] == t)["contents"]["prose"]
        asked = info.get("asked", [])
        answers = [w["answer"] for w in info["warmups"]] + [a["answer"] for a in asked]
        answers += [r["answer"] for r in result.data["rows"] if r["target"] == t]
        if size == SIZES[-1]:
            answers += [c["answer"] for c in result.data["battery"]["cases"]]
        visible = [a for a in answers if a.strip()]
        gate = next(g for g in result.gates if g.gate == f"garble@{size}")
        assert gate.metrics["answers"] == len(visible)
        clean = all(not garble(a) for a in visible)
        assert gate.verdict is (Verdict.PASS if clean else Verdict.FAIL), gate.reasons


def test_tool_battery_at_the_deepest_rung_through_the_servers_parser(
    ladder: tuple[StageResult, Path],
) -> None:
    """At the deepest rung the prompt with its three typed tools is sized with the server's
    tokenizer to the rung's size; the typed call, the same call streamed (served from the
    prefix cache) and the tool-result continuation are kept and judged by the preflight's own
    judges over what llama-server's tool parser returned."""
    from qualify.context.battery import judge_case
    from qualify.context.record import Case

    result, attempt = ladder
    bat = result.data["battery"]
    assert bat["target"] == TARGETS[-1] and bat["planned_tokens"] == SIZES[-1]
    assert bat["errors"] == [] and bat["sizing"]["within_tolerance"], bat["sizing"]
    cases = {c["case"]: c for c in bat["cases"]}
    assert set(cases) == {"typed", "streaming", "tool-result"}
    for name, case in cases.items():
        assert case["problem"] is None and case["http_status"] == 200, case
        assert SIZES[-1] - 200 <= case["prompt_tokens"] <= WINDOW, case
        assert (attempt / case["files"][0]).exists()
        gate = next(g for g in result.gates if g.gate.startswith(f"deep-{_gate_of(name)}@"))
        problems = judge_case(Case.model_validate(case), bat["tools"])
        assert gate.verdict is (Verdict.FAIL if problems else Verdict.PASS), gate.reasons
    streamed = cases["streaming"]
    assert streamed["sse_chunks"] > 1
    assert streamed["cached_tokens"] >= 0.9 * streamed["prompt_tokens"], "one prefill for both"


def _gate_of(case: str) -> str:
    return {"typed": "typed-tools", "streaming": "streaming-tools"}.get(case, case)


def test_the_record_reads_back_and_each_cell_holds_its_server_window(
    ladder: tuple[StageResult, Path],
) -> None:
    """The stage's data is its typed record; every counted cell was held against the server's
    histograms, which llama-server does not keep (it reports per request instead)."""
    from qualify.context.record import Record
    from qualify.registry import parse_record

    result, _ = ladder
    record = parse_record("context", result.data)
    assert isinstance(record, Record)
    assert record.model_dump(mode="json") == result.data
    counted = [r for r in record.rows if r.streams]
    assert counted and all(r.server_window is not None for r in counted)
    assert {r.server_window.why for r in counted if r.server_window} == {
        "the server keeps no latency histograms"
    }
