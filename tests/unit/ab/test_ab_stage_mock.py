"""The A/B stage end to end on mock servers: pairing, the usage guard, acceptance, faults."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from ab_fakes import FakeEngine, context

from qualify.ab import drive
from qualify.ab import stage as ab_stage
from qualify.ab.stage import ab
from qualify.gates.thresholds import Thresholds
from qualify.records import StageResult, Verdict


def _run(
    tmp: Path,
    cand: FakeEngine,
    ctrl: FakeEngine,
    extra: str = "",
    thresholds: Thresholds | None = None,
) -> tuple[StageResult, Any]:
    ctx = context(tmp, {"candidate": cand, "control": ctrl}, extra, thresholds)
    return asyncio.run(ab(ctx)), ctx


def _gates(result: StageResult) -> dict[str, Any]:
    return {g.gate: g for g in result.gates}


def _spec() -> FakeEngine:
    # vLLM-style speculative stream: four tokens in every SSE chunk.
    return FakeEngine(tokens_per_chunk=4, chunks=8, spec_counters=True)


def _plain() -> FakeEngine:
    return FakeEngine(tokens_per_chunk=1, chunks=32)


def _metric(result: StageResult, name: str) -> dict[str, Any]:
    return next(m for m in result.data["metrics"] if m["metric"] == name)


def test_lanes_alternate_one_server_at_a_time(tmp_path: Path) -> None:
    """Runs go A B A B ..., each lane's server in turn, with byte-identical requests."""
    cand, ctrl = _spec(), _plain()
    result, ctx = _run(tmp_path, cand, ctrl)
    assert result.data["order"] == ["candidate", "control"] * 3
    assert ctx.lanes.switches == ["candidate", "control"] * 3
    strip = [{k: v for k, v in b.items() if k != "model"} for b in cand.requests]
    assert strip == [{k: v for k, v in b.items() if k != "model"} for b in ctrl.requests]
    firsts = [b["messages"][0]["content"].splitlines()[0] for b in cand.requests]
    assert len(set(firsts)) == len(firsts), "every request has a unique first line"
    assert all(b["stream_options"] == {"include_usage": True} for b in cand.requests)
    gate = _gates(result)["paired"]
    assert gate.verdict is Verdict.PASS, gate.reasons
    assert all(
        q["sent"]["model"] for r in result.data["lanes"]["control"]["runs"] for q in r["requests"]
    )


def test_decode_counts_usage_not_chunks(tmp_path: Path) -> None:
    """Counting SSE chunks would erase the speculative lane's gain; usage keeps it."""
    result, _ = _run(tmp_path, _spec(), _plain())
    decode = _metric(result, "decode_tok_s")
    lanes = result.data["fidelity"]["lanes"]
    cand = lanes["candidate"]
    # 32 tokens in 8 chunks: the usage figure is about 4x what chunk counting reports.
    assert cand["chunks_per_token"] == pytest.approx(0.25)
    assert cand["decode_tok_s"] > 2.5 * cand["decode_tok_s_if_chunks_counted"]
    assert cand["chunk_counting_error_pct"] < -50
    assert lanes["control"]["chunks_per_token"] == pytest.approx(1.0)
    assert decode["candidate"] > 2 * decode["control"]
    assert decode["delta_pct"] > 100
    run = result.data["lanes"]["candidate"]["runs"][0]
    assert run["completion_tokens"] == 3 * 32 and run["token_chunks"] == 3 * 8


def test_acceptance_from_counter_deltas(tmp_path: Path) -> None:
    """Rate, mean length and the per-position curve come from before/after counter deltas."""
    result, _ = _run(tmp_path, _spec(), _plain())
    acc = result.data["acceptance"]
    # per request: 7 drafts of 4 tokens, 3 accepted each; 3 prompts x 3 runs, warm-ups excluded
    assert acc["drafts"] == 7 * 9
    assert acc["draft_tokens"] == 28 * 9
    assert acc["accepted"] == 21 * 9
    assert acc["rate"] == pytest.approx(0.75)
    assert acc["mean_length"] == pytest.approx(4.0)
    assert acc["per_position"] == pytest.approx([1.0, 1.0, 1.0, 0.0])
    per_run = result.data["lanes"]["candidate"]["runs"][1]["acceptance"]
    assert per_run["drafts"] == 21
    gate = {g.gate: g for g in result.gates}["acceptance"]
    assert gate.verdict is Verdict.PASS, gate.reasons


def test_missing_counters_make_acceptance_inconclusive(tmp_path: Path) -> None:
    """A speculative lane whose server exposes no spec counters is inconclusive, not a pass."""
    cand = _spec()
    cand.spec_counters = False
    result, _ = _run(tmp_path, cand, _plain())
    gate = {g.gate: g for g in result.gates}["acceptance"]
    assert gate.verdict is Verdict.INCONCLUSIVE
    assert "vllm:spec_decode_num_draft_tokens_total" in gate.reasons[0]
    assert result.data["acceptance"] is None


def test_low_acceptance_fails_the_floor(tmp_path: Path) -> None:
    """A measured rate below the house floor (thresholds.acceptance_floor) fails the gate."""
    strict = Thresholds(acceptance_floor=0.9)
    result, _ = _run(tmp_path, _spec(), _plain(), thresholds=strict)
    gate = _gates(result)["acceptance"]
    assert gate.verdict is Verdict.FAIL
    assert "0.750" in gate.reasons[0] and "0.9" in gate.reasons[0]


def test_gates_are_the_declared_ones(tmp_path: Path) -> None:
    """The stage runs what gates/ab/ declares; speed and draft length are judged."""
    result, _ = _run(tmp_path, _spec(), _plain())
    got = _gates(result)
    assert set(got) == {
        "paired",
        "decode",
        "e2e",
        "spec-speedup",
        "acceptance",
        "draft-length@candidate",
        "fidelity@candidate",
        "fidelity@control",
        "lossless",
        "draft-overrun@candidate",
        "decode-outliers@candidate",
        "decode-outliers@control",
    }
    # the advisory checks of implausible figures pass on plausible evidence
    assert got["draft-overrun@candidate"].severity == "advisory"
    assert got["decode-outliers@control"].verdict is Verdict.PASS, got["decode-outliers@control"]
    # four tokens a chunk against one: the candidate decodes far faster
    assert got["decode"].verdict is Verdict.PASS and got["spec-speedup"].verdict is Verdict.PASS
    assert got["draft-length@candidate"].verdict is Verdict.PASS
    # the mock reports no server timings: fidelity cannot be judged
    assert got["fidelity@control"].verdict is Verdict.INCONCLUSIVE
    assert "no decode rate" in got["fidelity@control"].reasons[0]


def test_draft_length_beyond_the_pin_fails(tmp_path: Path) -> None:
    """Per-position counters for 8 positions against draft_tokens = 4 pinned: fail."""
    cand = _spec()
    cand.per_pos = [0] * 8
    result, _ = _run(tmp_path, cand, _plain())
    gate = _gates(result)["draft-length@candidate"]
    assert gate.verdict is Verdict.FAIL and "pins 4" in gate.reasons[0]


@pytest.mark.parametrize(
    ("field", "change"),
    [
        ("max_tokens", {"max_tokens": 7}),
        ("seed", {"seed": 99}),
        ("messages", {"messages": [{"role": "user", "content": "a different prompt"}]}),
    ],
)
def test_lanes_sent_different_bodies_fail_paired(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, field: str, change: dict[str, Any]
) -> None:
    """`paired` judges what each lane actually sent, not the plan they share."""
    real = drive.drive_run

    async def skewed(client: Any, keep: Any, lane: str, plan: Any, *rest: Any) -> Any:
        if lane == "control":
            plan.bodies = [{**b, **change} for b in plan.bodies]
        return await real(client, keep, lane, plan, *rest)

    monkeypatch.setattr(ab_stage.drive, "drive_run", skewed)
    result, _ = _run(tmp_path, _spec(), _plain())
    gate = _gates(result)["paired"]
    assert gate.verdict is Verdict.FAIL
    assert f"with different {field} in the two lanes" in gate.reasons[0]


def test_degenerate_answers_are_flagged_kept_and_not_speed(tmp_path: Path) -> None:
    """A `1000000...` answer is listed with why, kept as evidence, left out of the p50s and
    of the aggregate output rate."""
    cand = _spec()
    cand.degenerate = {"reverses a string"}
    result, _ = _run(tmp_path, cand, _plain())
    flagged = result.data["degenerate"]
    assert {(d["lane"], d["prompt"]) for d in flagged} == {("candidate", "code")}
    assert len(flagged) == 3 and "run of" in flagged[0]["why"] and flagged[0]["file"]
    run = result.data["lanes"]["candidate"]["runs"][0]
    assert run["counted"] == 2 and run["aggregate_output_tok_s"] is None
    assert any("degenerate answer" in e["why"] for e in result.data["excluded"])
    control_run = result.data["lanes"]["control"]["runs"][0]
    assert control_run["counted"] == 3 and control_run["aggregate_output_tok_s"] is not None


def test_fidelity_is_stored_and_judged_against_server_figures(tmp_path: Path) -> None:
    """A server claiming a decode rate a million times the client's fails fidelity."""
    ctrl = _plain()
    ctrl.server_timings = {"predicted_per_second": 1e9, "prompt_ms": 0.0}
    result, _ = _run(tmp_path, _spec(), ctrl)
    fid = result.data["fidelity"]["lanes"]["control"]
    assert fid["n_decode"] == 9 and fid["source"] == "llama-server timings"
    assert fid["engine"] == "vllm"
    gate = _gates(result)["fidelity@control"]
    assert gate.verdict is Verdict.FAIL and "decode_ratio_median" in gate.reasons[0]


def test_reasoning_only_answers_are_excluded_and_listed(tmp_path: Path) -> None:
    """A reasoning-only answer is kept, listed with why, and left out of the p50s."""
    ctrl = _plain()
    ctrl.reasoning_only = {"reverses a string"}
    result, _ = _run(tmp_path, _spec(), ctrl)
    ex = result.data["excluded"]
    assert {(e["lane"], e["prompt"]) for e in ex} == {("control", "code")}
    assert len(ex) == 3 and "no visible answer" in ex[0]["why"]
    run = result.data["lanes"]["control"]["runs"][0]
    assert run["counted"] == 2
    kept = [q for q in run["requests"] if q["prompt"] == "code"]
    assert kept and kept[0]["file"], "the excluded exchange is kept as evidence"
    assert {g.gate: g for g in result.gates}["paired"].verdict is Verdict.PASS


def test_failed_request_is_an_error_of_the_pairing(tmp_path: Path) -> None:
    """An HTTP 500 makes `paired` an error naming the lane, run and prompt."""
    ctrl = _plain()
    ctrl.fail = {"Hamlet"}
    result, _ = _run(tmp_path, _spec(), ctrl)
    gate = {g.gate: g for g in result.gates}["paired"]
    assert gate.verdict is Verdict.ERROR
    assert "control run 1" in gate.reasons[0] and "summarise" in gate.reasons[0]


def test_stream_without_usage_is_not_counted(tmp_path: Path) -> None:
    """Without usage the tokens are unknown: the request is excluded, never chunk-counted."""
    cand = _spec()
    cand.no_usage = True
    result, _ = _run(tmp_path, cand, _plain())
    run = result.data["lanes"]["candidate"]["runs"][0]
    assert run["counted"] == 0 and run["p50"]["decode_tok_s"] is None
    assert "never from SSE chunks" in run["excluded"][0]["why"]
    assert _metric(result, "decode_tok_s")["candidate"] is None
    assert {g.gate: g for g in result.gates}["paired"].verdict is Verdict.INCONCLUSIVE


def test_kv_gauge_recorded(tmp_path: Path) -> None:
    """The KV gauge a vLLM lane exposes is recorded per lane."""
    result, _ = _run(tmp_path, _spec(), _plain())
    kv = result.data["lanes"]["candidate"]["kv"]
    assert kv["gauges"] == {"vllm:kv_cache_usage_perc": 0.25}


def test_identical_outputs_are_counted(tmp_path: Path) -> None:
    """Paired answers are compared by digest: different texts are visible in the evidence."""
    result, _ = _run(tmp_path, _spec(), _plain())
    same = result.data["fidelity"]["identical_outputs"]
    # The mock lanes pack words differently, so no pair matches; 3 prompts x 3 runs pair up.
    assert same == {"pairs": 9, "identical": 0}
    twin, _ = _run(tmp_path / "twin", _plain(), _plain())
    assert twin.data["fidelity"]["identical_outputs"] == {"pairs": 9, "identical": 9}


def test_the_stage_writes_its_typed_record_and_it_round_trips(tmp_path: Path) -> None:
    """`data` is the typed record's JSON form: it reads back into the same record."""
    from qualify.ab.record import Record
    from qualify.registry import parse_record

    result, _ = _run(tmp_path, _spec(), _plain())
    record = parse_record("ab", result.data)
    assert isinstance(record, Record)
    assert record.model_dump(mode="json") == result.data
    assert Record.model_validate(record.model_dump(mode="json")) == record
    assert record.lanes["candidate"].drafts and not record.lanes["control"].drafts


def test_energy_is_unmeasured_without_a_sampler(tmp_path: Path) -> None:
    """No sampler in the run: each lane's J per output token is unmeasured, saying why."""
    result, _ = _run(tmp_path, _spec(), _plain())
    for lane in ("candidate", "control"):
        energy = result.data["lanes"][lane]["energy"]
        assert energy["j_per_output_token"] is None and energy["joules"] is None
        assert "no GPU telemetry" in energy["why"] and "no sampler" in energy["why"]
        run = result.data["lanes"][lane]["runs"][0]["energy"]
        assert run["joules"] is None and run["completion_tokens"] == 3 * 32


class _Sampler:
    """A sampler reading a steady 100 W over every window it is asked about."""

    def __init__(self) -> None:
        self.windows: list[tuple[float, float]] = []

    def energy(self, t0: float, t1: float) -> dict[str, object]:
        self.windows.append((t0, t1))
        j = 100.0 * (t1 - t0)
        return {"joules": j, "mean_power_w": 100.0, "why": None, "cards": {"0": {"joules": j}}}


def test_energy_per_output_token_integrates_each_timed_window(tmp_path: Path) -> None:
    """Each run's timed window is metered; a lane's J per token is its joules over its tokens."""
    from ab_fakes import context as make_context

    ctx = make_context(tmp_path, {"candidate": _spec(), "control": _plain()})
    ctx.sampler = _Sampler()
    result = asyncio.run(ab(ctx))
    assert len(ctx.sampler.windows) == 6 and all(t1 > t0 for t0, t1 in ctx.sampler.windows)
    for lane in ("candidate", "control"):
        block = result.data["lanes"][lane]
        energy = block["energy"]
        joules = sum(r["energy"]["joules"] for r in block["runs"])
        assert energy["joules"] == pytest.approx(joules) and energy["why"] is None
        assert energy["completion_tokens"] == 3 * 3 * 32
        assert energy["j_per_output_token"] == pytest.approx(joules / (3 * 3 * 32))
