"""Timed cells and the gates read from their rows, against the llama-server imitation."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from typing import Any

from context_fake import FakeLlama  # type: ignore[import-not-found]

from qualify.context.corpus import Needles, Source, document, messages, new_nonce
from qualify.context.gates import cold_cache_gate, fidelity, idle_gate, needles_gate
from qualify.context.ladder import Cell, Driver, public, run_cell
from qualify.httpclient.client import Client, Exchange
from qualify.records import Verdict
from qualify.serving.engines import LLAMACPP


def _keep(label: str, ex: Exchange) -> list[str]:
    return [label]


def _driver(client: Client, idle_wait_s: float = 3.0) -> Driver:
    body = {"model": "m", "max_tokens": 32, "temperature": 0}
    return Driver(client, LLAMACPP, body, 30.0, idle_wait_s, _keep)


def _prompts(seed: int = 1) -> tuple[Needles, list[dict[str, str]], Callable[[], Any]]:
    needles = Needles.draw(random.Random(seed))
    doc = document(Source("prose", seed), 6000, needles)
    warm = messages(doc, needles, new_nonce())
    return needles, warm, lambda: messages(doc, needles, new_nonce())


def _cell(pass_: str, prompts: list[Any], needles: Needles) -> Cell:
    return Cell(1500, pass_, "prose", 1500, 1490, prompts, needles)


def _ladder(fake: FakeLlama, client: Client, c: int = 1, cold_same: bool = False) -> list[Any]:
    needles, warm, cold = _prompts()
    drv = _driver(client)

    async def go() -> list[Any]:
        await drv.send(warm, "warmup-1")
        await drv.send(warm, "warmup-2")
        rows = [await run_cell(drv, _cell("warm", [warm] * c, needles))]
        cold_prompts = [warm] * c if cold_same else [cold() for _ in range(c)]
        rows.append(await run_cell(drv, _cell("cold", cold_prompts, needles)))
        return [public(r) for r in rows]

    return asyncio.run(go())


def test_cold_misses_and_warm_hits_the_prefix_cache(
    fake: FakeLlama, fake_client: Callable[[], Client]
) -> None:
    """Behind a new nonce the cold prompt reuses only the role header; the warm one reuses all."""
    warm, cold = _ladder(fake, fake_client())
    assert cold["cached_tokens"] < 20  # the role header and "Reference ", in toy tokens
    assert warm["cached_tokens"] >= warm["actual_prompt_tokens"] - 1
    assert cold["cached_tokens_metric_delta"] == cold["cached_tokens"]
    assert cold_cache_gate(1500, [], [warm, cold]).verdict is Verdict.PASS


def test_a_cold_pass_without_a_nonce_fails_the_gate(
    fake: FakeLlama, fake_client: Callable[[], Client]
) -> None:
    """If the cold prompt repeated the warm one, the cache would flatter it: the gate fails."""
    rows = _ladder(fake, fake_client(), cold_same=True)
    gate = cold_cache_gate(1500, [], rows)
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
    assert needles_gate(1500, [], rows).verdict is Verdict.PASS


def test_the_deep_needle_alone_is_not_enough(
    fake: FakeLlama, fake_client: Callable[[], Client]
) -> None:
    """A model that finds only the 99% needle fails, and the reason names the 50% needle."""
    fake.sees = "deep"
    rows = _ladder(fake, fake_client())
    gate = needles_gate(1500, [], rows)
    assert gate.verdict is Verdict.FAIL
    assert "missed the 50% needle" in gate.reasons[0]
    assert gate.metrics["found_99"] == 2 and gate.metrics["found_50"] == 0


def test_busy_engine_cell_is_error_and_nothing_is_sent(
    fake: FakeLlama, fake_client: Callable[[], Client]
) -> None:
    """An engine busy past the idle wait makes the cell `error`; no request is timed."""
    needles, warm, _ = _prompts()
    fake.busy_scrapes = 10_000
    row = public(asyncio.run(run_cell(_driver(fake_client(), 0.2), _cell("warm", [warm], needles))))
    assert row["verdict"] == "error"
    assert "not counted: before the cell" in row["reasons"][0]
    assert fake.chats == []
    assert idle_gate([row]).verdict is Verdict.ERROR
    assert needles_gate(1500, [], [row]).verdict is Verdict.ERROR


def test_a_briefly_busy_engine_is_waited_for(
    fake: FakeLlama, fake_client: Callable[[], Client]
) -> None:
    """An engine busy for a couple of polls is waited for, and the cell then counts."""
    needles, warm, _ = _prompts()
    fake.busy_scrapes = 2
    row = public(asyncio.run(run_cell(_driver(fake_client()), _cell("warm", [warm], needles))))
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


def test_fidelity_reads_server_timings(fake: FakeLlama, fake_client: Callable[[], Client]) -> None:
    """The server's own timings are collected for the cross-check over counted streams."""
    rows = _ladder(fake, fake_client())
    fid = fidelity(rows)
    assert fid["n"] == 2
    assert fid["ttft_minus_server_prompt_ms_median"] is not None
