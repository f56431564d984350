"""The context ladder judged again from its kept exchanges: a real run (docs/gpu, llama-server
on an H200) decided honestly verifies; its `result.json` rewritten to pass (the needles the
model missed marked found, the answers rewritten to name them), re-sealed and signed with the
pinned decision key, is refused naming the gate and the field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from rejudge_run import all_pass, judged_again, policy, unpack, verified

from qualify.present.record import DecisionRecord

HOUSE = policy("context")
CONTEXT = "context/attempt-001"


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return unpack(tmp_path_factory.mktemp("published"))


def _blocks(record: DecisionRecord) -> bool:
    return any(r.startswith("context/") for r in record.evaluation.reasons)


def test_the_honest_run_verifies_with_the_context_judged_again(
    published: Path, tmp_path: Path
) -> None:
    record, report = judged_again(published, tmp_path, "context")
    assert _blocks(record), "the real ladder misses the 50% needle from 3072 tokens up"
    assert report.ok, report.problems
    assert any(n.startswith(f"{CONTEXT}: judged again from its exchanges") for n in report.notes)


def _found(result: dict[str, Any]) -> None:
    """Every needle found, every answer naming both, every gate passed."""
    all_pass(result)
    for rung in result["data"]["targets"]:
        values = " and ".join(n["value"] for n in rung["contents"]["prose"]["needles"])
        for row in result["data"]["rows"]:
            if row["target"] != rung["target"]:
                continue
            row["verdict"], row["reasons"] = "pass", []
            row["needles"] = {"50": True, "99": True}
            row["answer"] = values
            for s in row["streams"]:
                s["needles"] = {"50": True, "99": True}
                s["answer"] = values


@pytest.mark.parametrize("edit", [all_pass, _found], ids=["gates", "needles-and-answers"])
def test_a_context_result_rewritten_to_pass_is_refused(
    published: Path, tmp_path: Path, edit: Any
) -> None:
    record, report = judged_again(published, tmp_path, "context", edit)
    assert not _blocks(record), "the decision alone takes the rewritten ladder as passed"
    assert not report.ok
    assert any("gate context/needles@3072 is pass, judged again" in p for p in report.problems)
    if edit is _found:
        assert any(".answer is" in p for p in report.problems), report.problems


def _cold_cached(result: dict[str, Any]) -> None:
    """A cold stream's cached tokens and decode figure rewritten."""
    row = next(r for r in result["data"]["rows"] if r["pass"] == "cold")
    row["streams"][0]["decode_tok_s"] *= 2
    row["decode_tok_s"] *= 2


def test_a_context_figure_rewritten_is_refused_naming_the_field(
    published: Path, tmp_path: Path
) -> None:
    _, report = verified(published, tmp_path, HOUSE, CONTEXT, _cold_cached)
    assert not report.ok
    assert any("data.rows[1].decode_tok_s is" in p for p in report.problems), report.problems


def test_a_cell_left_out_is_refused(published: Path, tmp_path: Path) -> None:
    """Dropping the failing rows of a rung (and sealing again) leaves a cell with no row."""

    def drop_rows(result: dict[str, Any]) -> None:
        result["data"]["rows"] = [r for r in result["data"]["rows"] if r["verdict"] == "pass"]

    _, report = verified(published, tmp_path, HOUSE, CONTEXT, drop_rows)
    assert not report.ok
    assert any("cells the candidate names have no row" in p for p in report.problems)


def test_a_cell_compared_with_the_servers_histograms_is_compared_again_the_same_way() -> None:
    """vLLM reports no figures per request: the live ladder compares each cell with the
    server's latency histograms over it (`with_server_window`). Judged again, the sealed window
    is applied to the timings derived from the exchanges, so the fidelity gate reads the same
    ratio in both paths (before, the rebuilt timings had none: fail live, inconclusive again)."""
    from types import SimpleNamespace
    from typing import cast

    from qualify.context.rebuild import _windowed
    from qualify.context.record import Row
    from qualify.evidence.kept import AttemptView
    from qualify.httpclient.chat import ChatOutcome
    from qualify.httpclient.timing import (
        ServerComparison,
        fidelity,
        timing,
        with_server_window,
    )
    from qualify.httpclient.window import ServerWindow

    ts = [
        timing(
            ChatOutcome(
                usage={"prompt_tokens": 10, "completion_tokens": 11},
                finish_reason="length",
                t_first_output=0.12 + k,
                t_first_visible=0.12 + k,
                t_last_token=0.22 + k,
                token_chunk_times=[0.12 + k + 0.01 * i for i in range(11)],
            )
        )
        for k in (0.0, 0.01)
    ]
    window = ServerWindow.from_dict(
        {
            "source": "vllm histograms",
            "requests": 2.0,
            "generated_tokens": 22.0,
            "decode_s": 0.19,
            "ttft_n": 2.0,
            "ttft_s": 0.2,
            "prefill_n": 2.0,
            "prefill_s": 0.18,
            "queue_n": 2.0,
            "queue_s": 0.01,
            "itl_n": 20.0,
            "itl_s": 0.19,
        }
    )
    live, info = with_server_window(ts, window)
    trusted: list[str] = []
    view = cast(AttemptView, SimpleNamespace(trust=trusted.append))
    row = Row.model_validate(
        {"target": 1, "pass": "warm", "content": "prose", "concurrency": 2, "planned_tokens": 1}
        | {"server_window": json.loads(json.dumps(info))}
    )
    again = _windowed(view, row, ts)
    assert again == live and row.server_window == ServerComparison.model_validate(info)
    assert fidelity(again)["decode_ratio_median"] == pytest.approx(1.9 / 2)
    assert fidelity(ts)["n_decode"] == 0, "without the window there is nothing to compare"
    assert trusted == ["each cell's server latency-histogram window (the scrapes around it)"]
