"""The vram stage through the pipeline, against the real local llama-server.

This machine has no GPU, so the real outcome is "no telemetry"; a recipe whose GPUs sit on
another host is watched through a DCGM exporter, here a local one serving pages recorded on the
H200 (ports 18600-18699).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit" / "vram"))

from qualify.evidence.store import EvidenceStore, RunDir
from qualify.pipeline import Runner, plan
from qualify.progress import Progress
from qualify.records import StageResult, Verdict
from qualify.registry import parse_record
from qualify.vram.record import Record

pytestmark = pytest.mark.integration

DATA = Path(__file__).resolve().parents[1] / "unit" / "vram" / "data"
SERVER_PORT = 18680
EXPORTER_PORT = 18681


def _run_pipeline(candidate: Path, root: Path) -> RunDir:
    p = plan(candidate)
    run = EvidenceStore(root).new_run(p.loaded.candidate.name)
    (run.path / "run.json").write_text("{}")
    asyncio.run(Runner(p, run, Progress(quiet=True)).execute(resume=False))
    return run


def _result(run: RunDir, stage: str) -> StageResult:
    results = run.results(stage)
    assert results, f"stage {stage} left no result"
    return results[-1]


def _no_gpu_here() -> bool:
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:
        return True
    pynvml.nvmlShutdown()
    return False


@pytest.mark.skipif(not _no_gpu_here(), reason="this host has GPU telemetry")
def test_no_gpu_means_inconclusive_no_telemetry(
    candidate_factory: Callable[..., Path], tmp_path: Path
) -> None:
    """identity runs on the real server while the sampler is on; with no NVML and no DCGM URL
    both vram gates are inconclusive, the telemetry one "no telemetry", naming each source."""
    cand = candidate_factory(SERVER_PORT, stages=["identity", "vram"])
    run = _run_pipeline(cand, tmp_path / "evidence")
    assert _result(run, "identity").status == "finished"
    vram = _result(run, "vram")
    assert vram.verdict is Verdict.INCONCLUSIVE
    gates = {g.key: g for g in vram.gates}
    assert set(gates) == {"vram/reserve", "vram/telemetry"}
    (why,) = gates["vram/telemetry"].reasons
    assert why.startswith("no telemetry: nvml: ")
    assert "DCGM: stages.vram.dcgm_urls is empty" in why
    record = parse_record("vram", vram.data)
    assert isinstance(record, Record)
    assert record.model_dump(mode="json") == vram.data
    assert record.cards == [] and record.source is None
    assert record.reserve_gib == 3.0


def test_remote_gpus_through_a_dcgm_exporter(
    candidate_factory: Callable[..., Path], tmp_path: Path
) -> None:
    """source = "dcgm": the exporter page recorded at the H200's 80 GiB step is scraped all
    through identity on the real server; the card keeps the 3 GiB reserve and its samples are
    sealed evidence under telemetry/."""
    from gpu_fakes import FakeExporter

    exporter = FakeExporter(EXPORTER_PORT, (DATA / "dcgm-peak.txt").read_text())
    try:
        cand = candidate_factory(
            SERVER_PORT,
            stages=["identity", "vram"],
            replace={'source = "auto"': f'source = "dcgm"\ndcgm_urls = ["{exporter.url}"]'},
        )
        run = _run_pipeline(cand, tmp_path / "evidence")
    finally:
        exporter.close()
    vram = _result(run, "vram")
    assert [(g.key, g.verdict) for g in vram.gates] == [
        ("vram/reserve@127.0.0.1:0", Verdict.PASS),
        ("vram/telemetry", Verdict.PASS),
    ]
    record = parse_record("vram", vram.data)
    assert isinstance(record, Record)
    assert record.model_dump(mode="json") == vram.data
    (card,) = record.cards
    ident = card.stages["identity"]
    assert ident.samples >= 1 and ident.min_free_mib == 60225.0
    assert ident.peak_power_w == 915.047
    assert record.source == "dcgm" and exporter.hits >= 2
    (series,) = record.series_files
    assert series.startswith("telemetry/attempt-001/")
    assert (run.path / series).stat().st_size > 0
