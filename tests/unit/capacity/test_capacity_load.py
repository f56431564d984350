"""SLOs and goodput, correctness under load, the open-loop sender and its lag, the knee search's
stopping rules: each fed data that passes and data that fails."""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from qualify.capacity import knee as knee_mod
from qualify.capacity.answers import broken, json_prefix_ok
from qualify.capacity.loads import Lag, OpenCell
from qualify.capacity.openloop import Plan, burst, harness_lag, poisson, send
from qualify.capacity.settings import CapacitySettings, LoadSettings
from qualify.capacity.slo import SloSettings, effective, goodput, misses, wilson
from qualify.gates.thresholds import Thresholds
from qualify.httpclient.chat import ToolCall
from qualify.httpclient.client import Client

T = Thresholds()


def stream(**kw: Any) -> dict[str, Any]:
    s = {
        "failed": None,
        "cut": None,
        "broken": [],
        "ttft_s": 0.5,
        "e2e_s": 2.0,
        "decode_tok_s": 50.0,
        "completion_tokens": 64,
    }
    s.update(kw)
    return s


# --- SLOs -----------------------------------------------------------------------------------


def test_candidate_may_only_tighten_the_house_slos() -> None:
    slo = effective(T, SloSettings(ttft_s=1.0, e2e_s=600.0, percentile=99, goodput_floor=0.5))
    assert slo.ttft_s == 1.0  # tighter: taken
    assert slo.e2e_s == T.slo_e2e_s  # looser: ignored, said so
    assert slo.percentile == 99 and slo.goodput_floor == T.goodput_floor
    assert any("e2e_s 600" in w for w in slo.ignored)
    assert any("goodput_floor 0.5" in w for w in slo.ignored)


def test_a_request_misses_on_any_slo_or_a_broken_answer() -> None:
    slo = effective(T, SloSettings(ttft_s=1.0, tpot_s=0.05, e2e_s=10.0))
    assert misses(stream(), slo) == []
    assert misses(stream(ttft_s=1.5), slo) == ["ttft_s 1.5 > 1"]
    assert misses(stream(decode_tok_s=10.0), slo) == ["tpot_s 0.1 > 0.05"]
    assert misses(stream(e2e_s=11.0), slo) == ["e2e_s 11 > 10"]
    assert misses(stream(broken=["empty answer"]), slo) == ["broken answer: empty answer"]
    assert misses(stream(unfinished="still running"), slo) == ["unfinished: still running"]
    assert misses(stream(failed="HTTP 500: x"), slo) == ["HTTP 500: x"]


def test_goodput_share_rate_and_interval() -> None:
    slo = effective(T, SloSettings(ttft_s=1.0))
    streams = [stream() for _ in range(8)] + [stream(ttft_s=3.0), stream(failed="refused")]
    g = goodput(streams, slo, window_s=20.0)
    assert g.good == 8 and g.goodput == 0.8
    lo, hi = g.goodput_ci95
    assert lo < 0.8 < hi and lo >= 0 and hi <= 1
    assert g.goodput_rps == pytest.approx(0.4)
    assert g.goodput_rps_ci95 == pytest.approx([lo * 10 / 20, hi * 10 / 20])
    assert g.slo_met.ttft_s is False  # p95 TTFT of the answered is 3 s > 1 s
    assert g.missed_by == {"ttft_s": 1, "refused": 1}


def test_wilson_interval_edges() -> None:
    assert wilson(0, 0) is None
    lo, hi = wilson(10, 10)  # type: ignore[misc]
    assert hi == pytest.approx(1.0) and 0.6 < lo < 0.8
    lo, hi = wilson(0, 10)  # type: ignore[misc]
    assert lo == 0.0 and hi < 0.35


@pytest.mark.parametrize("n", range(1, 200))
def test_the_wilson_interval_holds_its_own_share(n: int) -> None:
    """All good or none good: the bound is the share exactly (48 of 48 once gave
    0.9999999999999999 and a negative error bar that stopped an H200 capacity stage)."""
    for good in (0, n // 2, n):
        lo, hi = wilson(good, n)  # type: ignore[misc]
        assert lo <= good / n <= hi


# --- answers --------------------------------------------------------------------------------


def test_a_right_prose_answer_is_not_broken() -> None:
    text = "The document describes how rivers shape valleys over long periods of time. " * 2
    assert broken("prose", text, "stop", 40, 64) == []
    assert broken("prose", text, "length", 64, 64) == []  # cut by the budget: not truncation


def test_broken_answers_each_say_why() -> None:
    assert broken("prose", "", "stop", 0, 64) == ["empty answer"]
    assert "truncated: no finish reason" in broken("prose", "fine words here", None, 5, 64)
    assert broken("prose", "fine words", "length", 10, 64) == [
        "truncated: finish_reason length after 10 of 64 tokens"
    ]
    deg = broken("prose", "1" * 100, "length", 64, 64)
    assert any(p.startswith("degenerate:") for p in deg)
    leak = broken("prose", "Sure <|im_end|> and then some more words to read", "stop", 20, 64)
    assert any(p.startswith("garble: special tokens") for p in leak)
    bad = broken("json", '{"a": 1,, }', "stop", 10, 64)
    assert bad and bad[0].startswith("json: not JSON")
    assert broken("json", '```json\n[{"id": 1}]\n```', "stop", 10, 64) == []


def test_json_cut_by_the_budget_must_be_a_json_prefix() -> None:
    prefixes = ['[{"id": 1, "title": "Riv', '[{"id": 1, "ti', '{"a": [1, 2', '[{"id": 1},', "[tru"]
    for ok in prefixes:
        assert json_prefix_ok(ok), ok
    for bad in ['[{"id": 1}]]', "Here is the JSON: [", '{"a" 1', '[{"id": 1} {"id": 2}']:
        assert not json_prefix_ok(bad), bad
    assert broken("json", '[{"id": 1, "title": "Riv', "length", 64, 64) == []
    cut = broken("json", "Here is the JSON you asked for: [", "length", 64, 64)
    assert cut and "not a JSON prefix" in cut[0]


def test_a_tool_call_is_a_problem_since_the_load_offers_no_tool() -> None:
    call = [ToolCall(0, name="get_weather", arguments='{"city": "Oslo"}')]
    assert broken("prose", "", "tool_calls", 12, 64, call) == [
        "tool call 'get_weather' though no tool was offered"
    ]


# --- open loop ------------------------------------------------------------------------------


def test_arrivals_are_seeded_poisson_and_bursts() -> None:
    a = poisson(2.0, 200, seed=1)
    assert a == poisson(2.0, 200, seed=1) and a != poisson(2.0, 200, seed=2)
    assert a[0] == 0.0 and all(y >= x for x, y in itertools.pairwise(a))
    gaps = [y - x for x, y in itertools.pairwise(a)]
    assert 0.35 < sum(gaps) / len(gaps) < 0.65  # mean gap 1/rate
    assert burst(3) == [0.0, 0.0, 0.0]


def sse_answer(text: str = "hello there") -> bytes:
    chunks = [
        {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 3}},
    ]
    body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
    return body.encode()


def sse_response() -> httpx.Response:
    async def body() -> AsyncIterator[bytes]:
        yield sse_answer()

    return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body())


def client(handler: Any) -> Client:
    return Client("http://test", transport=httpx.MockTransport(handler))


def test_open_loop_sends_on_schedule_whatever_the_server_does() -> None:
    """A server that takes 0.3 s per answer does not delay the next send: open loop."""

    async def handler(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(0.3)
        return sse_response()

    async def go() -> Any:
        c = client(handler)
        try:
            return await send(c, Plan([{"n": i} for i in range(4)], [0.0, 0.05, 0.1, 0.15], 5.0))
        finally:
            await c.aclose()

    run = asyncio.run(go())
    assert all(s.exchange is not None and s.exchange.ok for s in run.sent)
    sends = [s.sent_s for s in run.sent]
    assert sends == sorted(sends) and sends[-1] is not None and sends[-1] < 0.3
    assert run.lag().ticks > 0 and run.lag().send_lag_ms_p99 is not None


def test_requests_past_the_deadline_are_cancelled_and_unfinished() -> None:
    async def handler(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(10)
        return httpx.Response(200)

    async def go() -> Any:
        c = client(handler)
        try:
            return await send(c, Plan([{}, {}], [0.0, 0.0], deadline_s=0.3))
        finally:
            await c.aclose()

    t0 = time.perf_counter()
    run = asyncio.run(go())
    assert time.perf_counter() - t0 < 5
    assert all(s.unfinished and "still running" in s.unfinished for s in run.sent)


def test_a_client_that_blocks_its_own_loop_is_a_harness_error() -> None:
    """A handler that blocks the event loop (as a client starved of CPU would) makes sends late
    and the loop oversleep: the cell is the harness's fault, named as such."""

    def handler(request: httpx.Request) -> httpx.Response:
        time.sleep(0.3)  # blocks the loop on purpose
        return sse_response()

    async def go() -> Any:
        c = client(handler)
        try:
            return await send(c, Plan([{}] * 4, [0.0, 0.05, 0.1, 0.15], 10.0))
        finally:
            await c.aclose()

    run = asyncio.run(go())
    why = harness_lag(run.lag(), bound_ms=100.0)
    assert why is not None and why.startswith("the client")
    assert harness_lag(Lag(send_lag_ms_p99=5.0, loop_oversleep_ms_p99=2.0), 100.0) is None


# --- the knee search's stopping rules -------------------------------------------------------


def fake_cells(
    monkeypatch: pytest.MonkeyPatch,
    good_up_to: float,
    lag_at: float | None = None,
    pace_up_to: float = 1e9,
):
    calls: list[float] = []

    async def open_cell(sender: Any, fresh: Any, offsets: list[float], **kw: Any) -> dict:
        rate = (len(offsets) - 1) / offsets[-1] if offsets[-1] else 0.0
        label = kw["label"]
        r = float(label.split("-")[-1].removesuffix("rps"))
        calls.append(r)
        share = 1.0 if r <= good_up_to else 0.5
        return {
            "requests": len(offsets),
            "good": int(share * len(offsets)),
            "goodput": share,
            "goodput_ci95": [share - 0.1, min(1.0, share + 0.1)],
            "goodput_rps": share * rate,
            "goodput_rps_ci95": None,
            "harness_error": "the client sent requests late" if lag_at and r >= lag_at else None,
            "pace": 1.0 if r <= pace_up_to else 0.6,
        }

    monkeypatch.setattr(knee_mod, "open_cell", open_cell)
    return calls


def search(s: LoadSettings) -> dict[str, Any]:
    slo = effective(T, SloSettings())
    return asyncio.run(
        knee_mod.search(
            None,  # type: ignore[arg-type]
            None,  # type: ignore[arg-type]
            s,
            kind="prose",
            max_tokens=64,
            slo=slo,
            lag_bound_ms=200.0,
            seed=1,
        )
    )


def test_the_search_stops_at_saturation_and_refines(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = fake_cells(monkeypatch, good_up_to=1.5)
    out = search(LoadSettings(start_rps=0.5, factor=2.0, refine=1, step_s=5, min_requests=4))
    assert calls[:3] == [0.5, 1.0, 2.0]  # 2.0 misses the floor: saturated
    assert calls[3] == pytest.approx(2**0.5, rel=1e-3)  # one bisection between 1 and 2
    k = out["knee"]
    assert k.saturated and not k.lower_bound and k.stopped.startswith("saturated")
    assert k.rate_rps == pytest.approx(2**0.5) and k.first_over == 2.0
    assert k.statement.startswith("serves 1.41 req/s at goodput 100% (95% interval")


def test_the_search_is_bounded_and_then_a_lower_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = fake_cells(monkeypatch, good_up_to=1e9)
    out = search(LoadSettings(start_rps=1, max_steps=3, step_s=5, min_requests=4))
    assert calls == [1, 2, 4]
    k = out["knee"]
    assert k.lower_bound and k.stopped.startswith("step bound")
    assert k.statement.startswith("serves at least 4 req/s")
    calls.clear()
    out = search(LoadSettings(start_rps=1, step_s=5, min_requests=4, max_requests=10))
    assert out["knee"].stopped.startswith("request bound") and out["requests"] <= 10


def test_a_start_above_the_floor_comes_down(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = fake_cells(monkeypatch, good_up_to=0.3)
    out = search(LoadSettings(start_rps=1, refine=0, step_s=5, min_requests=4))
    assert calls == [1, 0.5, 0.25]
    assert out["knee"].rate_rps == 0.25 and out["knee"].saturated
    calls.clear()
    none = search(LoadSettings(start_rps=1, max_steps=2, step_s=5, min_requests=4))
    assert none["knee"].rate_rps is None and none["knee"].statement.startswith("no rate")


def test_a_lagging_client_ends_the_search_with_no_figure(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_cells(monkeypatch, good_up_to=1e9, lag_at=2.0)
    out = search(LoadSettings(start_rps=1, step_s=5, min_requests=4))
    k = out["knee"]
    assert k.harness_error and k.stopped.startswith("harness")
    assert len(out["cells"]) == 2


def test_load_and_soak_settings_validate() -> None:
    s = CapacitySettings.model_validate({"load": {"start_rps": 0.2, "burst": 0}, "soak": {}})
    assert s.load.start_rps == 0.2 and s.soak.enabled
    with pytest.raises(ValueError):
        CapacitySettings.model_validate({"load": {"factor": 1.0}})
    with pytest.raises(ValueError):
        CapacitySettings.model_validate({"slo": {"ttft": 1}})


# --- the soak's readings --------------------------------------------------------------------


def test_soak_reads_error_counters_progress_and_drift() -> None:
    from qualify.capacity.soak import drift, error_counters, progress
    from qualify.serving.dialects import MetricsSnapshot

    text = (
        "# TYPE vllm:request_success_total counter\n"
        'vllm:request_success_total{finished_reason="stop"} 10\n'
        'vllm:request_success_total{finished_reason="abort"} 2\n'
        "# TYPE engine_errors_total counter\n"
        "engine_errors_total 3\n"
        "# TYPE llamacpp:n_decode_total counter\n"
        "llamacpp:n_decode_total 40\n"
        "# TYPE llamacpp:tokens_predicted_total counter\n"
        "llamacpp:tokens_predicted_total 7\n"
    )
    snap = MetricsSnapshot.parse(text)
    assert error_counters(snap) == {
        "engine_errors_total": 3.0,
        "vllm:request_success_total{finished_reason=abort}": 2.0,
    }
    assert progress(snap, ("llamacpp:tokens_predicted_total",)) == 47.0
    assert progress(MetricsSnapshot.parse("# TYPE x gauge\nx 1\n"), ()) is None
    rows = [{"ttft_s": t, "planned_s": i} for i, t in enumerate([1, 1, 1, 1, 2, 2, 3, 3, 3])]
    d = drift(rows)
    assert d["first_p50_s"] == 1 and d["last_p50_s"] == 3 and d["drift_pct"] == 200
    assert drift(rows[:5])["drift_pct"] is None  # too few to tell


def _streams(n: int, gap_s: float, e2e: Any) -> list[dict[str, Any]]:
    return [
        {"planned_s": i * gap_s, "lag_ms": 0.5, "e2e_s": e2e(i), "ttft_s": 0.01} for i in range(n)
    ]


def test_pace_is_the_served_share_of_the_offered_rate() -> None:
    """Flat latency (noisy) keeps pace; latency that climbs by a fixed step per request (a queue
    growing: each finishes 0.05 s after the last, arriving every 0.025 s) serves half."""
    flat = knee_mod.pace(_streams(48, 0.125, lambda i: 0.4 + 0.3 * ((i * 7919) % 11) / 11))
    assert flat is not None and flat == pytest.approx(1.0, abs=0.05)
    growing = knee_mod.pace(_streams(192, 0.025, lambda i: 0.2 + 0.025 * i))
    assert growing == pytest.approx(0.5, rel=1e-6)
    assert knee_mod.pace(_streams(2, 0.1, lambda i: 0.1)) is None  # too few to fit
    assert knee_mod.pace(_streams(8, 0.0, lambda i: 0.1)) is None  # a burst: all sent at once
    unanswered = [{"planned_s": 0.1 * i, "e2e_s": None} for i in range(8)]
    assert knee_mod.pace(unanswered) is None


def test_a_cell_that_falls_behind_does_not_hold_however_good_its_goodput(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Goodput 100% at every rate, but the server falls behind above 1.5 req/s: the knee is the
    last rate it kept pace with, and the reason says the queue grew."""
    calls = fake_cells(monkeypatch, good_up_to=1e9, pace_up_to=1.5)
    out = search(LoadSettings(start_rps=0.5, factor=2.0, refine=1, step_s=5, min_requests=4))
    assert calls[:3] == [0.5, 1.0, 2.0]
    k = out["knee"]
    assert k.saturated and k.rate_rps == pytest.approx(2**0.5) and k.first_over == 2.0
    assert "served 0.60 of the offered rate" in k.stopped and "queue grew" in k.stopped
    assert knee_mod.holds(OpenCell(goodput=1.0, pace=0.95), 0.9)
    assert not knee_mod.holds(OpenCell(goodput=1.0, pace=0.8), 0.9)
    assert not knee_mod.holds(OpenCell(goodput=0.5, pace=1.0), 0.9)
