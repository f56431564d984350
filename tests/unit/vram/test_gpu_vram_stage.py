"""The vram stage and its judges over the H200 run: one reserve result per card, the telemetry
gate, and judging over every attempt of a resumed run from the evidence alone.

Each judge is fed data that should fail it and data that should pass it (`vram-reserve`:
`reserve@<gpu>`; `vram-telemetry`: `telemetry`).
"""

from __future__ import annotations

import asyncio
import json
import types
from pathlib import Path
from typing import Any

import pytest
from gpu_recorded import judged, proof, replayed_sampler
from pydantic import ValidationError

from qualify.candidate import load_candidate
from qualify.evidence.store import EvidenceStore, RunDir
from qualify.gates.thresholds import Thresholds
from qualify.records import StageResult, Verdict
from qualify.stage import StageContext
from qualify.vram.judges import ReserveParams, TelemetryParams, reserve, telemetry
from qualify.vram.nvml import NvmlUnavailable
from qualify.vram.readings import Card, Poll, Reading
from qualify.vram.record import Card as RecordCard
from qualify.vram.record import Record, StageFigures, Telemetry
from qualify.vram.sampler import Sampler
from qualify.vram.select import choose
from qualify.vram.series import SampleLog, read_logs
from qualify.vram.settings import VramSettings
from qualify.vram.stage import ran, vram

ROOT = Path(__file__).resolve().parents[3]
STAGES = list(proof()["sources"]["nvml"]["cards"]["0"]["stages"])


def _by_key(gates: list[Any]) -> dict[str, Any]:
    return {g.gate: g for g in gates}


def test_h200_run_keeps_the_default_reserve() -> None:
    """At 3 GiB every stage of the H200 run passes; the data has every stage and figure."""
    gates, data = judged(replayed_sampler(), 3.0)
    assert [(g.gate, g.verdict) for g in gates] == [
        ("reserve@0", Verdict.PASS),
        ("telemetry", Verdict.PASS),
    ]
    (card,) = data.cards
    assert list(card.stages) == STAGES
    low = card.stages["alloc-80GiB"]
    assert low.min_free_mib == 60225.125 and low.samples == 16 and low.gaps == 0
    assert data.source == "nvml" and data.power_field == "NVML_FI_DEV_POWER_INSTANT"
    assert data.interval_ms.target == 250
    p50 = data.interval_ms.p50
    assert p50 is not None and 240 < p50 < 260  # the H200's own timing, replayed
    assert gates[0].metrics["worst_stage"] == "alloc-80GiB"


def test_a_reserve_above_the_lowest_free_fails_naming_stage_and_figures() -> None:
    """With a 60 GiB reserve (the house's, from Thresholds) only the 80 GiB step falls below."""
    gates, _ = judged(replayed_sampler(), 60.0)
    gate = _by_key(gates)["reserve@0"]
    assert gate.verdict is Verdict.FAIL
    (why,) = gate.reasons
    assert "stage alloc-80GiB left 60,225 MiB free" in why
    assert "reserve of 60 GiB (61,440 MiB)" in why and "GPU 0 (NVIDIA H200)" in why


def test_gpu_lost_mid_run_is_error_and_named() -> None:
    """The H200 replay losing its GPU after 60 reads: reserve@0 is error, naming card, stage
    and NVML's error, even though the reserve held until then."""
    gates, _ = judged(replayed_sampler(lose={"0": 60}), 3.0)
    gate = _by_key(gates)["reserve@0"]
    assert gate.verdict is Verdict.ERROR
    assert gate.reasons[0].startswith("GPU 0 (NVIDIA H200) disappeared during stage alloc-40GiB")
    assert "GPU is lost" in gate.reasons[0]


def test_a_stage_without_samples_is_inconclusive() -> None:
    """A stage that ran but has no sample of the card: the card's result is inconclusive."""
    gates, _ = judged(replayed_sampler(), 3.0, stages=[*STAGES, "late"])
    gate = _by_key(gates)["reserve@0"]
    assert gate.verdict is Verdict.INCONCLUSIVE
    assert "no sample in stage(s) late" in gate.reasons[0]


def test_no_sampler_and_no_source_are_inconclusive_no_telemetry() -> None:
    """No sampler, or one with no source: both gates inconclusive, the telemetry one saying
    "no telemetry" and what was tried."""
    gates, data = judged(None, 3.0)
    assert [(g.gate, g.verdict) for g in gates] == [
        ("reserve", Verdict.INCONCLUSIVE),
        ("telemetry", Verdict.INCONCLUSIVE),
    ]
    assert gates[1].reasons[0].startswith("no telemetry")
    assert data.cards == [] and data.source is None
    s = Sampler(None, 250, unavailable="nvml: NVML did not initialise")
    s.mark("identity")
    gates, _ = judged(s, 3.0)
    assert _by_key(gates)["telemetry"].reasons == ["no telemetry: nvml: NVML did not initialise"]


def _data(samples: int, missed: int, reserve_gib: float = 3.0) -> Record:
    figs = StageFigures(min_free_mib=9000.0, samples=samples, missed=missed, gaps=int(missed > 0))
    return Record(
        reserve_gib=reserve_gib,
        stages=["context"],
        cards=[RecordCard(gpu="0", name="H200", stages={"context": figs})],
        telemetry=[Telemetry(attempt=1, stopped=True)],
    )


def test_gap_fraction_beyond_the_bound_is_inconclusive() -> None:
    """6 missed of 100 intervals is over the default 5%: inconclusive; 4 of 100 passes; the
    bound is the house's."""
    (over,) = telemetry(_data(94, 6), TelemetryParams(), Thresholds())
    assert over.verdict is Verdict.INCONCLUSIVE
    assert "stage context missed 6 of 100 sampler intervals (6.0%)" in over.reasons[0]
    (under,) = telemetry(_data(96, 4), TelemetryParams(), Thresholds())
    assert under.verdict is Verdict.PASS
    (loose,) = telemetry(_data(94, 6), TelemetryParams(), Thresholds(vram_max_gap_fraction=0.1))
    assert loose.verdict is Verdict.PASS


def test_a_broken_sampler_is_error_and_a_start_problem_inconclusive() -> None:
    data = _data(10, 0)
    data.telemetry[0].failure = "the sampler stopped: RuntimeError: driver went away"
    (broken,) = telemetry(data, TelemetryParams(), Thresholds())
    assert broken.verdict is Verdict.ERROR and "driver went away" in broken.reasons[0]
    data = _data(10, 0)
    data.telemetry[0].start_problems = ["DCGM http://x/metrics did not answer"]
    (partial,) = telemetry(data, TelemetryParams(), Thresholds())
    assert partial.verdict is Verdict.INCONCLUSIVE


def test_reserve_judge_reads_the_house_reserve_not_the_data() -> None:
    """9,000 MiB free: fails a 9 GiB reserve, passes 8 GiB, whatever `reserve_gib` data says."""
    data = _data(10, 0, reserve_gib=0.0)
    (fail,) = reserve(data, ReserveParams(), Thresholds(vram_reserve_gib=9.0))
    assert fail.verdict is Verdict.FAIL and fail.part == "0"
    (ok,) = reserve(data, ReserveParams(), Thresholds(vram_reserve_gib=8.0))
    assert ok.verdict is Verdict.PASS


def test_slow_source_gaps_reach_the_telemetry_gate() -> None:
    """A sampler whose reads come every 3 intervals misses 2 of every 3: inconclusive."""
    s = Sampler(None, 250)
    s.tracks["0"] = types.SimpleNamespace(  # type: ignore[assignment]
        card=Card("0", "c", 1000.0), samples=0, last_t=None, lost=None
    )
    s.source = _Named()  # type: ignore[assignment]
    s.mark("slow", at=0.0)
    s.ingest(Poll([Reading("0", 0.75 * i + 0.1, 900.0, None, None) for i in range(20)], [], []))
    gates, data = judged(s, 0.5)
    figs = data.cards[0].stages["slow"]
    assert figs.samples == 20 and figs.missed == 38
    assert _by_key(gates)["telemetry"].verdict is Verdict.INCONCLUSIVE


class _Named:
    name, power_field, memory_info = "test", None, "test"

    def cards(self) -> list[Card]:
        return [Card("0", "c", 1000.0)]

    def poll(self) -> Poll:
        return Poll([], [], [])

    def close(self) -> None:
        pass


def test_auto_tries_every_source_and_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    """auto with no NVML and no DCGM URL: no source, two reasons (there is no nvidia-smi
    source: it reads the same NVML library)."""

    def no_nvml(*a: object, **k: object) -> None:
        raise NvmlUnavailable("NVML did not initialise: NVML Shared Library Not Found")

    monkeypatch.setattr("qualify.vram.select.NvmlSource", no_nvml)
    sampler = choose(VramSettings())
    assert sampler.source is None
    assert sampler.unavailable == (
        "nvml: NVML did not initialise: NVML Shared Library Not Found; "
        "DCGM: stages.vram.dcgm_urls is empty; "
        "prometheus: stages.vram.prometheus_url is not set"
    )
    assert choose(VramSettings(source="none")).unavailable == 'stages.vram.source is "none"'


def test_settings_reject_dcgm_without_urls_and_nvidia_smi() -> None:
    """source = "dcgm" with no URL, a URL that is not http(s), or "nvidia-smi" is bad input."""
    with pytest.raises(ValidationError, match="needs dcgm_urls"):
        VramSettings(source="dcgm")
    with pytest.raises(ValidationError, match=r"dcgm_urls\.0"):
        VramSettings(dcgm_urls=["node-b:9400/metrics"])
    with pytest.raises(ValidationError, match="source"):
        VramSettings(source="nvidia-smi")  # type: ignore[arg-type]


def _ctx(run: RunDir) -> StageContext:
    loaded = load_candidate(ROOT / "examples" / "smollm2" / "candidate.toml")
    lanes = types.SimpleNamespace(current=None, loaded={})
    return StageContext("vram", loaded, run, run.new_attempt("vram"), lanes, None)  # type: ignore[arg-type]


def _ran(run: RunDir, *names: str) -> None:
    for name in names:
        a = run.new_attempt(name)
        a.write_result(
            StageResult(
                stage=name,
                attempt=a.number,
                status="finished",
                verdict=Verdict.PASS,
                started_at="t",
                ended_at="t",
            )
        )
        a.seal()


def test_stage_writes_the_log_as_it_goes_and_the_contract_data(tmp_path: Path) -> None:
    """The registered stage, on the H200 replay logged into the run: the sample log is sealed
    evidence under telemetry/, listed in the data, and read back whole."""
    run = EvidenceStore(tmp_path).new_run("c")
    (run.path / "run.json").write_text(json.dumps({"stages": STAGES}))
    _ran(run, *STAGES)
    ctx = _ctx(run)
    ctx.sampler = replayed_sampler(log=SampleLog(run))
    result = asyncio.run(vram(ctx))
    assert result.verdict is Verdict.PASS, result.reasons
    keys = {"source", "power_field", "reserve_gib", "interval_ms", "cards", "series_files"}
    assert keys <= set(result.data)
    (log,) = read_logs(run)
    assert log.summary is not None and (log.path / "manifest.json").is_file()
    assert log.header["source"] == "nvml" and log.header["memory_info"] == "v2"
    rows = [line for line in log.lines if isinstance(line, list)]
    assert len(rows) == 99 and min(r[3] for r in rows) == 60225.125
    assert result.data["series_files"] == ["telemetry/attempt-001/samples.000.jsonl"]
    json.dumps(result.model_dump(mode="json"))


def test_resume_judges_every_attempt_from_the_evidence(tmp_path: Path) -> None:
    """Attempt 1 sampled `identity` (10 GiB free at its lowest) and was killed mid `context`
    (its log never sealed); the resumed attempt samples only `ab`. The vram stage judges all
    three stages: with a 20 GiB reserve, identity fails though this process never saw it."""
    run = EvidenceStore(tmp_path).new_run("c")
    (run.path / "run.json").write_text(
        json.dumps({"stages": ["identity", "context", "ab", "vram"]})
    )
    first = Sampler(_Named(), 250, log=SampleLog(run))  # type: ignore[arg-type]
    first.mark("identity", at=0.0)
    first.ingest(Poll([Reading("0", 0.25 * i, 10240.0, None, None) for i in range(1, 5)], [], []))
    first.mark("context", at=1.1)
    first.ingest(Poll([Reading("0", 1.25, 30000.0, None, None)], [], []))
    assert first.log.attempt is not None
    first.log.attempt._open[0].close()  # killed: the stream is flushed, nothing sealed
    _ran(run, "identity", "context")
    second = Sampler(_Named(), 250, log=SampleLog(run))  # type: ignore[arg-type]
    second.mark("ab", at=0.0)
    second.ingest(Poll([Reading("0", 0.25 * i, 30000.0, None, None) for i in range(1, 5)], [], []))
    _ran(run, "ab")
    ctx = _ctx(run)
    ctx.sampler = second
    ctx.thresholds = Thresholds(vram_reserve_gib=20.0)
    result = asyncio.run(vram(ctx))
    gate = _by_key(result.gates)["reserve@0"]
    assert gate.verdict is Verdict.FAIL
    assert "stage identity left 10,240 MiB free" in gate.reasons[0]
    stages = result.data["cards"][0]["stages"]
    assert set(stages) == {"identity", "context", "ab"}
    assert stages["identity"]["attempts"] == [1] and stages["ab"]["attempts"] == [2]
    assert [t["stopped"] for t in result.data["telemetry"]] == [False, True]
    ctx.thresholds = Thresholds(vram_reserve_gib=5.0)
    # a passing house reserve over the same evidence
    from qualify.vram.judges import reserve as reserve_judge

    (ok,) = reserve_judge(Record.model_validate(result.data), ReserveParams(), ctx.thresholds)
    assert ok.verdict is Verdict.PASS


def test_ran_skips_only_not_run_attempts() -> None:
    """A stage recorded "not run: ..." did not run; one killed without a result did."""
    done = StageResult(
        stage="identity",
        attempt=1,
        status="finished",
        verdict=Verdict.PASS,
        started_at="t",
        ended_at="t",
    )
    not_run = StageResult(
        stage="context",
        attempt=1,
        status="aborted",
        verdict=Verdict.SKIPPED,
        reasons=["not run: the run was aborted earlier (x)"],
        started_at="t",
        ended_at="t",
    )
    results = {"identity": [done], "context": [not_run], "ab": [None]}
    listed = ["identity", "context", "ab", "vram"]
    assert ran(listed, lambda name: results.get(name, [])) == ["identity", "ab"]
