"""The paired A/B against the real local llama-server: ngram-mod candidate, no-spec control."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import StageRunner, write_candidate

from qualify.ab.prompts import shipped_path
from qualify.ab.table import METRICS
from qualify.evidence.store import EvidenceStore
from qualify.pipeline import plan
from qualify.records import StageResult, Verdict
from qualify.serving.local import LocalPaths
from qualify.serving.process import stop_all

# One lean A/B is shared by the tests below; on a loaded 2-core machine it can take minutes.
pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(1800)]

# Six kinds; the refactor prompt makes the model copy its input, which ngram-mod drafts.
KINDS = ("refactor", "quote", "code", "explain-error", "translate", "table")
LEAN = {
    "runs = 3\nmax_tokens = 128": 'runs = 2\nmax_tokens = 96\nwarmups = 1\nprompts = "prompts.yaml"'
}


def _lean_prompts(cand: Path) -> None:
    shipped = yaml.safe_load(shipped_path().read_text())
    by_kind = {p["kind"]: p for p in shipped["prompts"]}
    subset = {**shipped, "prompts": [by_kind[k] for k in KINDS]}
    (cand.parent / "prompts.yaml").write_text(yaml.safe_dump(subset, sort_keys=False))


@pytest.fixture(scope="module")
def ab_result(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StageResult]:
    """2 runs per lane, alternating, 6 prompts of 6 kinds, 96 output tokens."""
    if not LocalPaths("cpu").ready():
        pytest.fail("the local llama-server is not built: run `qualify local-server build`")
    d = tmp_path_factory.mktemp("ab")
    cand = write_candidate(d / "cand", stages=["ab"], replace=LEAN)
    _lean_prompts(cand)
    p = plan(cand)
    run = EvidenceStore(d / "evidence").new_run(p.loaded.candidate.name)
    (run.path / "run.json").write_text("{}")
    try:
        yield StageRunner(p, run).stage("ab")
    finally:
        stop_all()


def _gate(result: StageResult, name: str) -> Any:
    return next(g for g in result.gates if g.gate == name)


def test_lane_tables_and_deltas_are_filled(ab_result: StageResult) -> None:
    """Both lanes ran every run in A B A B order; every figure and delta is measured."""
    data = ab_result.data
    assert data["order"] == ["candidate", "control", "candidate", "control"]
    assert _gate(ab_result, "paired").verdict is Verdict.PASS, ab_result.reasons
    for lane in ("candidate", "control"):
        block = data["lanes"][lane]
        assert len(block["runs"]) == 2
        assert all(r["idle_before"]["idle"] and r["idle_after"]["idle"] for r in block["runs"])
        assert all(v is not None for v in block["figure"].values()), block["figure"]
        assert all(lo <= hi for lo, hi in block["spread"].values())
    rows = {m["metric"]: m for m in data["metrics"]}
    assert set(rows) == {name for name, _, _ in METRICS}
    for m in rows.values():
        assert m["delta"] == pytest.approx(m["candidate"] - m["control"])
        paired = m["paired"]
        if m["metric"] == "aggregate_output_tok_s":
            assert paired["pairs"] <= 2  # one pair per run: the runs are the samples
        else:  # every prompt of both runs, paired by run and prompt, minus degenerate answers
            assert paired["prompts"] >= 2 and paired["pairs"] >= paired["prompts"]
        if paired["too_few"]:
            assert m["within_noise"] is None
        else:
            lo, hi = m["ci95"]
            assert m["within_noise"] is (lo <= 0 <= hi)


def test_acceptance_from_real_counters(ab_result: StageResult) -> None:
    """Rate, mean length and per-position curve come from llama-server's counters, and agree
    with the per-response timings.draft_n / draft_n_accepted; the control drafts nothing."""
    gate = _gate(ab_result, "acceptance")
    assert gate.verdict is Verdict.PASS, gate.reasons
    acc = ab_result.data["acceptance"]
    assert acc["drafts"] > 0 and 0 < acc["rate"] <= 1
    assert acc["mean_length"] == pytest.approx(1 + acc["accepted"] / acc["drafts"])
    assert acc["per_position"] and acc["per_position"][0] >= acc["per_position"][-1]
    assert "llama.cpp counters" in acc["source"]
    for r in ab_result.data["lanes"]["candidate"]["runs"]:
        per = r["per_response_drafts"]
        assert (per["draft_n"] or 0) == r["acceptance"]["draft_tokens"]
        assert (per["draft_n_accepted"] or 0) == r["acceptance"]["accepted"]
    control = ab_result.data["lanes"]["control"]["acceptance"]
    assert control["draft_tokens"] == 0 and control["rate"] is None


def test_chunks_and_kv_are_recorded(ab_result: StageResult) -> None:
    """Chunk counts and the chunk/token ratio are recorded per lane: llama-server sends one
    token per SSE chunk even with accepted drafts (so the multi-token guard is shown on a mock
    vLLM stream in the unit tests); the KV capacity comes from the startup log."""
    fid = ab_result.data["fidelity"]["lanes"]
    for lane in ("candidate", "control"):
        assert fid[lane]["token_chunks"] > 0
        assert 0.9 <= fid[lane]["chunks_per_token"] <= 1.0
        kv = ab_result.data["lanes"][lane]["kv"]
        assert kv["log"]["n_ctx_slot"] == 8192 and "no KV gauge" in kv["note"]


def test_gates_judge_draft_length_speed_and_fidelity(ab_result: StageResult) -> None:
    """The declared gates all ran; ngram-mod's per-position counters show the 64 positions the
    example pins; both lanes' client timings were compared with llama-server's own."""
    gates = {g.gate: g for g in ab_result.gates}
    assert {"decode", "e2e", "spec-speedup", "fidelity@candidate", "fidelity@control"} <= set(gates)
    length = gates["draft-length@candidate"]
    assert length.verdict is Verdict.PASS, length.reasons
    assert length.metrics["counter_positions"] == 64
    for lane in ("candidate", "control"):
        fid = ab_result.data["fidelity"]["lanes"][lane]
        assert fid["n_decode"] > 0 and fid["source"] == "llama-server timings"
        assert gates[f"fidelity@{lane}"].verdict in (Verdict.PASS, Verdict.FAIL)
    for name in ("decode", "e2e"):
        paired = gates[name].metrics["paired"]
        assert paired["pairs"] > 0, gates[name].reasons
        if paired["too_few"]:
            assert gates[name].verdict is Verdict.INCONCLUSIVE
            assert "too few samples" in gates[name].reasons[0]


def test_the_record_reads_back_with_energy_and_the_advisory_checks(ab_result: StageResult) -> None:
    """The stage's data is its typed record; J per output token is stated per lane (unmeasured,
    with why, on this GPU-less machine); the implausible-figure checks ran as advisory gates."""
    from qualify.ab.record import Record
    from qualify.registry import parse_record

    record = parse_record("ab", ab_result.data)
    assert isinstance(record, Record)
    assert record.model_dump(mode="json") == ab_result.data
    for name, lane in record.lanes.items():
        assert lane.energy is not None and lane.energy.completion_tokens > 0, name
        if lane.energy.j_per_output_token is None:
            assert lane.energy.why and "unmeasured" in lane.energy.why
        assert all(r.energy is not None and r.energy.window_s for r in lane.runs)
    gates = {g.gate: g for g in ab_result.gates}
    for name in ("draft-overrun@candidate", "decode-outliers@candidate", "decode-outliers@control"):
        assert gates[name].severity == "advisory"
    # ngram-mod drafts at most 64 tokens: its counters never give more accepted per draft
    assert gates["draft-overrun@candidate"].verdict is Verdict.PASS, gates[
        "draft-overrun@candidate"
    ]
