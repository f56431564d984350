"""Timed cells and the gates read from their rows, against the llama-server imitation."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from typing import Any

from context_fake import FakeLlama, Kept  # type: ignore[import-not-found]

from qualify.context.corpus import Needles, Source, document, messages, new_nonce
from qualify.context.judges import (
    ColdCacheParams,
    FidelityParams,
    IdleParams,
    NeedlesParams,
    cold_cache,
    fidelity,
    idle,
    needles,
)
from qualify.context.ladder import Cell, run_cell
from qualify.context.rebuild import degenerate_streams, fidelity_summary, speed_summary
from qualify.context.record import Record, Row
from qualify.gates.registry import Judged
from qualify.gates.thresholds import Thresholds
from qualify.httpclient.client import Client
from qualify.records import Verdict
from qualify.serving.dialects import LLAMACPP
from qualify.serving.sender import Sender

RUNG = {"target": 1500, "planned_tokens": 1500, "clamped": False, "window": 8192, "errors": []}


def _data(rows: list[dict[str, Any]]) -> dict[str, Any]:
    return {"targets": [RUNG], "rows": rows}


def needles_gate(rows: list[dict[str, Any]]) -> Judged:
    [j] = needles(Record.model_validate(_data(rows)), NeedlesParams(), Thresholds())
    return j


def cold_cache_gate(rows: list[dict[str, Any]]) -> Judged:
    [j] = cold_cache(Record.model_validate(_data(rows)), ColdCacheParams(), Thresholds())
    return j


def idle_gate(rows: list[dict[str, Any]]) -> Judged:
    [j] = idle(Record.model_validate(_data(rows)), IdleParams(), Thresholds())
    return j


def _driver(client: Client, idle_wait_s: float = 3.0, kept: Kept | None = None) -> Sender:
    body = {"model": "m", "max_tokens": 32, "temperature": 0}
    return Sender(client, LLAMACPP, body, 30.0, idle_wait_s, (kept or Kept()).keep)


def _row(client: Client, cell: Cell, idle_wait_s: float = 3.0) -> dict[str, Any]:
    """One cell run and its row as sealed."""
    kept = Kept()
    row = asyncio.run(run_cell(_driver(client, idle_wait_s, kept), cell))
    [sealed] = kept.rows([row], cell.needles)
    return sealed


def _prompts(seed: int = 1) -> tuple[Needles, list[dict[str, str]], Callable[[], Any]]:
    needles = Needles.draw(random.Random(seed))
    doc = document(Source("prose", seed), 6000, needles)
    warm = messages(doc, needles, new_nonce())
    return needles, warm, lambda: messages(doc, needles, new_nonce())


def _cell(pass_: str, prompts: list[Any], needles: Needles) -> Cell:
    return Cell(1500, pass_, "prose", 1500, 1490, prompts, needles)


def _ladder(fake: FakeLlama, client: Client, c: int = 1, cold_same: bool = False) -> list[Any]:
    needles, warm, cold = _prompts()
    kept = Kept()
    drv = _driver(client, kept=kept)

    async def go() -> list[Any]:
        await drv.send(warm, "warmup-1")
        await drv.send(warm, "warmup-2")
        rows = [await run_cell(drv, _cell("warm", [warm] * c, needles))]
        cold_prompts = [warm] * c if cold_same else [cold() for _ in range(c)]
        rows.append(await run_cell(drv, _cell("cold", cold_prompts, needles)))
        return kept.rows(rows, needles)

    return asyncio.run(go())


def test_cold_misses_and_warm_hits_the_prefix_cache(
    fake: FakeLlama, fake_client: Callable[[], Client]
) -> None:
    """Behind a new nonce the cold prompt reuses only the role header; the warm one reuses all."""
    warm, cold = _ladder(fake, fake_client())
    assert cold["cached_tokens"] < 20  # the role header and "Reference ", in toy tokens
    assert warm["cached_tokens"] >= warm["actual_prompt_tokens"] - 1
    assert cold["cached_tokens_metric_delta"] == cold["cached_tokens"]
    assert cold_cache_gate([warm, cold]).verdict is Verdict.PASS


def test_a_cold_pass_without_a_nonce_fails_the_gate(
    fake: FakeLlama, fake_client: Callable[[], Client]
) -> None:
    """If the cold prompt repeated the warm one, the cache would flatter it: the gate fails."""
    rows = _ladder(fake, fake_client(), cold_same=True)
    gate = cold_cache_gate(rows)
    assert gate.verdict is Verdict.FAIL
    assert "the prefix cache flattered it" in gate.reasons[0]


def test_both_needles_found_passes_with_the_answer_kept(
    fake: FakeLlama, fake_client: Callable[[], Client]
) -> None:
    """A model that names both numbers passes; its answer is in the row."""
    rows = _ladder(fake, fake_client())
    needles, _, _ = _prompts()
    assert all(r["needles"] == {"50": True, "99": True} for r in rows)
    assert needles.pair[0].value in rows[0]["answer"]
    assert needles_gate(rows).verdict is Verdict.PASS


def test_the_deep_needle_alone_is_not_enough(
    fake: FakeLlama, fake_client: Callable[[], Client]
) -> None:
    """A model that finds only the 99% needle fails, and the reason names the 50% needle."""
    fake.sees = "deep"
    rows = _ladder(fake, fake_client())
    gate = needles_gate(rows)
    assert gate.verdict is Verdict.FAIL
    assert "missed the 50% needle" in gate.reasons[0]
    assert gate.metrics["found_99"] == 2 and gate.metrics["found_50"] == 0


def test_busy_engine_cell_is_error_and_nothing_is_sent(
    fake: FakeLlama, fake_client: Callable[[], Client]
) -> None:
    """An engine busy past the idle wait makes the cell `error`; no request is timed."""
    needles, warm, _ = _prompts()
    fake.busy_scrapes = 10_000
    row = _row(fake_client(), _cell("warm", [warm], needles), 0.2)
    assert row["verdict"] == "error"
    assert "not counted: before the cell" in row["reasons"][0]
    assert fake.chats == []
    assert idle_gate([row]).verdict is Verdict.ERROR
    assert needles_gate([row]).verdict is Verdict.ERROR


def test_a_briefly_busy_engine_is_waited_for(
    fake: FakeLlama, fake_client: Callable[[], Client]
) -> None:
    """An engine busy for a couple of polls is waited for, and the cell then counts."""
    needles, warm, _ = _prompts()
    fake.busy_scrapes = 2
    row = _row(fake_client(), _cell("warm", [warm], needles))
    assert row["verdict"] == "pass"
    assert row["idle"]["before"]["polls"] == 3
    assert idle_gate([row]).verdict is Verdict.PASS


def test_no_metrics_makes_idle_inconclusive(
    fake: FakeLlama, fake_client: Callable[[], Client]
) -> None:
    """Without idle gauges the cells run but the idle gate is inconclusive, never pass."""
    fake.metrics = False
    rows = _ladder(fake, fake_client())
    assert idle_gate(rows).verdict is Verdict.INCONCLUSIVE


def test_concurrent_streams_report_per_stream_and_aggregate(
    fake: FakeLlama, fake_client: Callable[[], Client]
) -> None:
    """At c=2 a cell holds two streams, each with its own figures, and an aggregate rate."""
    warm, cold = _ladder(fake, fake_client(), c=2)
    for row in (warm, cold):
        assert row["concurrency"] == 2 and len(row["streams"]) == 2
        assert row["completion_tokens"] == sum(s["completion_tokens"] for s in row["streams"])
        assert row["aggregate_output_tok_s"] is not None
    first, second = (s["actual_prompt_tokens"] for s in cold["streams"])
    assert abs(first - second) <= 4


def test_a_stream_without_usage_is_an_error(
    fake: FakeLlama, fake_client: Callable[[], Client]
) -> None:
    """Tokens are never counted from chunks: a stream without usage makes the cell `error`."""
    fake.usage = False
    rows = _ladder(fake, fake_client())
    assert rows[0]["verdict"] == "error"
    assert "include_usage" in rows[0]["reasons"][0]
    assert rows[0]["completion_tokens"] is None


def test_counted_streams_keep_their_timings_for_fidelity(
    fake: FakeLlama, fake_client: Callable[[], Client]
) -> None:
    """Each counted stream's timing, with the server's own figures, goes to the fidelity
    summary."""
    needles, warm, _ = _prompts()
    kept, timings = Kept(), {}
    row = asyncio.run(
        run_cell(_driver(fake_client(), kept=kept), _cell("warm", [warm] * 2, needles))
    )
    kept.rows([row], needles, timings)
    assert [t.server_decode_tok_s for t in timings[2]] == [100.0, 100.0]
    assert all(t.ttft_minus_server_prompt_ms is not None for t in timings[2])


DIGITS = "The numbers are 1" + "0" * 120


def test_a_degenerate_answer_is_kept_flagged_and_not_a_speed(
    fake: FakeLlama, fake_client: Callable[[], Client]
) -> None:
    """Of two streams, the one answering `1000000…` is kept with its answer and flagged; the
    row's decode figures come from the other stream only, and no aggregate rate is published."""
    needles, warm, _ = _prompts()
    fake.answers = [DIGITS, "The numbers are 12 and 34, as the document states."]
    row = _row(fake_client(), _cell("warm", [warm] * 2, needles))
    bad = [s for s in row["streams"] if s["degenerate"]]
    good = [s for s in row["streams"] if not s["degenerate"]]
    assert len(bad) == 1 and len(good) == 1 and DIGITS.startswith(bad[0]["answer"])
    assert "a run of" in bad[0]["degenerate"] and bad[0]["decode_tok_s"] is not None
    assert row["decode_tok_s"] == good[0]["decode_tok_s"]
    assert row["ttfo_s"] is not None and row["aggregate_output_tok_s"] is None
    assert row["degenerate"] == [
        {"stream": row["streams"].index(bad[0]) + 1, "reason": bad[0]["degenerate"]}
    ]
    assert "left out of the decode figures" in row["notes"][0]
    listed = degenerate_streams([Row.model_validate(row)])
    assert [(d.pass_, d.answer) for d in listed] == [("warm", bad[0]["answer"])]
    speed = speed_summary([Row.model_validate(row)]).warm
    assert speed.streams == 2 and speed.degenerate_left_out == 1
    assert speed.decode_tok_s_median == good[0]["decode_tok_s"]


def test_every_answer_degenerate_leaves_no_decode_figure(
    fake: FakeLlama, fake_client: Callable[[], Client]
) -> None:
    needles, warm, _ = _prompts()
    fake.answers = [DIGITS]
    row = _row(fake_client(), _cell("warm", [warm], needles))
    assert row["decode_tok_s"] is None and row["itl_p50_ms"] is None and row["e2e_s"] is None
    assert row["streams"][0]["decode_tok_s"] is not None  # kept on the stream as evidence
    assert speed_summary([Row.model_validate(row)]).warm.decode_tok_s_median is None


def test_a_client_that_disagrees_with_the_server_fails_fidelity(
    fake: FakeLlama, fake_client: Callable[[], Client]
) -> None:
    """The imitation claims a million tok/s while its tokens arrive at least 1 ms apart: the
    summary, per concurrency, shows the disagreement and the judge fails every concurrency."""
    fake.server_decode = 1e6
    needles, warm, _ = _prompts()
    kept, timings = Kept(), {}
    drv = _driver(fake_client(), kept=kept)
    for c in (1, 2):
        kept.rows(
            [asyncio.run(run_cell(drv, _cell("warm", [warm] * c, needles)))], needles, timings
        )
    summary = fidelity_summary("llama.cpp", timings)
    assert summary.requests == 3 and summary.engine == "llama.cpp"
    assert sorted(summary.by_concurrency) == ["1", "2"]
    judged = fidelity(Record(fidelity=summary), FidelityParams(), Thresholds())
    assert [(j.part, j.verdict) for j in judged] == [("c=1", Verdict.FAIL), ("c=2", Verdict.FAIL)]
    assert "decode_ratio_median" in judged[0].reasons[0]
