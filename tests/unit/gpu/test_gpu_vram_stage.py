"""The vram stage's policy over the H200 run: one gate per card, the contract's data table."""

from __future__ import annotations

import asyncio
import json
import types
from pathlib import Path

import pytest
from gpu_recorded import proof, replayed_sampler
from pydantic import ValidationError

from qualify.candidate import load_candidate
from qualify.evidence.store import EvidenceStore
from qualify.records import Verdict
from qualify.stage import StageContext
from qualify.vram import sampler as sampler_mod
from qualify.vram.nvml import NvmlUnavailable
from qualify.vram.readings import Card, Poll, Reading
from qualify.vram.sampler import Sampler
from qualify.vram.select import choose
from qualify.vram.series import decode
from qualify.vram.settings import VramSettings
from qualify.vram.stage import evaluate, vram

ROOT = Path(__file__).resolve().parents[3]
STAGES = list(proof()["sources"]["nvml"]["cards"]["0"]["stages"])


def test_h200_run_keeps_the_default_reserve() -> None:
    """At 3 GiB every stage of the H200 run passes; the data has every stage and figure."""
    gates, data = evaluate(replayed_sampler(), 3.0)
    assert [(g.gate, g.verdict) for g in gates] == [("reserve@0", Verdict.PASS)]
    (card,) = data["cards"]
    assert list(card["stages"]) == STAGES and card["verdict"] == "pass"
    low = card["stages"]["alloc-80GiB"]
    assert low["min_free_mib"] == 60225.125 and low["samples"] == 16 and low["gaps"] == 0
    assert data["source"] == "nvml" and data["power_field"] == "NVML_FI_DEV_POWER_INSTANT"
    assert data["interval_ms"]["target"] == 250
    p50 = data["interval_ms"]["p50"]
    assert p50 is not None and 240 < p50 < 260  # the H200's own timing, replayed
    assert gates[0].metrics["worst_stage"] == "alloc-80GiB"


def test_a_reserve_above_the_lowest_free_fails_naming_stage_and_figures() -> None:
    """With a 60 GiB reserve only the 80 GiB step falls below it, and the reason says so."""
    gates, data = evaluate(replayed_sampler(), 60.0)
    (gate,) = gates
    assert gate.verdict is Verdict.FAIL and data["cards"][0]["verdict"] == "fail"
    (why,) = gate.reasons
    assert "stage alloc-80GiB left 60,225 MiB free" in why
    assert "reserve of 60 GiB (61,440 MiB)" in why and "GPU 0 (NVIDIA H200)" in why


def test_gpu_lost_mid_run_is_error_and_named() -> None:
    """The H200 replay losing its GPU after 60 reads: reserve@0 is error, naming card, stage
    and NVML's error, even though the reserve held until then."""
    gates, data = evaluate(replayed_sampler(lose={"0": 60}), 3.0)
    (gate,) = gates
    assert gate.verdict is Verdict.ERROR and data["cards"][0]["verdict"] == "error"
    assert gate.reasons[0].startswith("GPU 0 (NVIDIA H200) disappeared during stage alloc-40GiB")
    assert "GPU is lost" in gate.reasons[0]


def test_a_stage_without_samples_is_inconclusive() -> None:
    """A stage marked after the last sample has none: the card's gate is inconclusive."""
    s = replayed_sampler()
    s.mark("late", at=s.marks[-1][0] + 3600)
    gates, _ = evaluate(s, 3.0)
    assert gates[0].verdict is Verdict.INCONCLUSIVE
    assert "no sample in stage(s) late" in gates[0].reasons[0]


def test_no_sampler_and_no_source_are_inconclusive_no_telemetry() -> None:
    """No sampler, or a sampler with no source, gives one inconclusive `telemetry` gate whose
    reason starts with "no telemetry" and says what was tried."""
    gates, data = evaluate(None, 3.0)
    assert [(g.gate, g.verdict) for g in gates] == [("telemetry", Verdict.INCONCLUSIVE)]
    assert gates[0].reasons[0].startswith("no telemetry")
    assert data["cards"] == [] and data["source"] is None
    s = Sampler(None, 250, unavailable="nvml: NVML did not initialise")
    gates, _ = evaluate(s, 3.0)
    assert gates[0].reasons == ["no telemetry: nvml: NVML did not initialise"]


def test_auto_tries_every_source_and_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    """auto with no NVML, no nvidia-smi and no DCGM URL: no source, three reasons."""

    def no_nvml(*a: object, **k: object) -> None:
        raise NvmlUnavailable("NVML did not initialise: NVML Shared Library Not Found")

    monkeypatch.setattr("qualify.vram.select.NvmlSource", no_nvml)
    monkeypatch.setenv("PATH", "/nonexistent")
    choice = choose("auto", 250, [])
    assert choice.source is None
    assert choice.why_none == (
        "nvml: NVML did not initialise: NVML Shared Library Not Found; "
        "nvidia-smi: nvidia-smi is not on PATH; DCGM: stages.vram.dcgm_urls is empty"
    )
    assert choose("none", 250, []).why_none == 'stages.vram.source is "none"'


def test_settings_reject_dcgm_without_urls() -> None:
    """source = "dcgm" with no URL, or a URL that is not http(s), is bad input."""
    with pytest.raises(ValidationError, match="needs dcgm_urls"):
        VramSettings(source="dcgm")
    with pytest.raises(ValidationError, match=r"dcgm_urls\.0"):
        VramSettings(dcgm_urls=["node-b:9400/metrics"])


def test_stage_writes_series_and_the_contract_data(tmp_path: Path) -> None:
    """The registered stage, on the H200 replay: result data as the evidence contract says,
    and each card's series file (under 1 MiB) listed and readable."""
    loaded = load_candidate(ROOT / "examples" / "smollm2" / "candidate.toml")
    run = EvidenceStore(tmp_path).new_run("c")
    attempt = run.new_attempt("vram")
    lanes = types.SimpleNamespace(current=None)
    ctx = StageContext("vram", loaded, run, attempt, lanes, None)  # type: ignore[arg-type]
    ctx.sampler = replayed_sampler()
    result = asyncio.run(vram(ctx))
    assert result.verdict is Verdict.PASS
    keys = {"source", "power_field", "reserve_gib", "interval_ms", "cards", "series_files"}
    assert keys <= set(result.data)
    assert set(result.data["cards"][0]) == {"gpu", "name", "total_mib", "stages", "verdict"}
    (name,) = result.data["series_files"]
    header, rows = decode((attempt.path / name).read_bytes())
    assert header["source"] == "nvml" and header["memory_info"] == "v2"
    assert len(rows) == 99 and min(r[2] for r in rows) == 60225.125
    json.dumps(result.model_dump(mode="json"))


def test_in_memory_series_is_capped_and_keeps_the_minimum(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Past the row cap the in-memory series is merged in place: it stays under the cap, and
    the lowest free memory (one dip among 5,000 samples) is still in it."""
    monkeypatch.setattr(sampler_mod, "MAX_ROWS", 1000)
    s = Sampler(None, 250)
    s.tracks["0"] = sampler_mod.Track(Card("0", "c", 1000.0))
    s.mark("long", at=0.0)
    for i in range(5000):
        free = 100.0 if i == 3333 else 900.0
        s.ingest(Poll([Reading("0", 1.0 + i * 0.25, free, None, float(i))], [], []))
    rows = s.tracks["0"].rows
    assert len(rows) <= 1000
    assert min(r[2] for r in rows) == 100.0 and max(r[4] or 0 for r in rows) == 4999.0
    assert sum(r[5] for r in rows) == 5000
