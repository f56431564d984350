"""The H200 run recorded in data/ (see docs/gpu-sampler.md), and replays of it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gpu_fakes import ReplayNvml

from qualify.gates.files import load_gates
from qualify.gates.runner import judge_gates
from qualify.gates.thresholds import Thresholds
from qualify.records import GateResult
from qualify.vram.nvml import NvmlSource
from qualify.vram.record import Record
from qualify.vram.sampler import Sampler
from qualify.vram.series import SampleLog
from qualify.vram.stage import build_record

DATA = Path(__file__).parent / "data"
ROOT = Path(__file__).resolve().parents[3]


def proof() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((DATA / "h200-proof.json").read_text())
    return data


def nvml_records() -> list[dict[str, Any]]:
    lines = (DATA / "nvml-samples.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def baseline() -> list[dict[str, Any]]:
    data: list[dict[str, Any]] = json.loads((DATA / "nvml-baseline.json").read_text())
    return data


def stage_starts(source: str, t0: float) -> list[tuple[str, float]]:
    """When each stage began, on the clock of `t0`: 1 ms before its first recorded sample."""
    rows = next(iter(proof()["sources"][source]["cards"].values()))["rows"]
    starts: list[tuple[str, float]] = []
    for row in rows:
        if not starts or starts[-1][0] != row[1]:
            starts.append((row[1], t0 + row[0] - 0.001))
    return starts


def replay_nvml(lose: dict[str, int] | None = None, instant: bool = True) -> ReplayNvml:
    info = {c["gpu"]: {"name": c["name"], "uuid": c["uuid"]} for c in baseline()}
    return ReplayNvml(nvml_records(), info, lose=lose, instant=instant)


def replayed_sampler(
    lose: dict[str, int] | None = None, instant: bool = True, log: SampleLog | None = None
) -> Sampler:
    """The recorded NVML run fed, read by read, through NvmlSource and the sampler's filing
    (into `log`: a run's evidence, or memory by default)."""
    nv = replay_nvml(lose, instant)
    records = nvml_records()
    src = NvmlSource(nvml=nv, clock=nv.clock)
    nv.started = True
    rows0 = next(iter(proof()["sources"]["nvml"]["cards"].values()))["rows"][0]
    sampler = Sampler(src, 250, log=log)
    for stage, at in stage_starts("nvml", records[0]["t"] - rows0[0]):
        sampler.mark(stage, at=at)
    for _ in records:
        sampler.ingest(src.poll())
    return sampler


def judged(
    sampler: Sampler | None, reserve_gib: float = 3.0, stages: list[str] | None = None, **th: Any
) -> tuple[list[GateResult], Record]:
    """The vram gates (as gates/vram/ declares them) over what one sampler logged."""
    log = sampler.log.read() if sampler is not None else None
    logs = [log] if log is not None else []
    ran = stages if stages is not None else (sampler.stages() if sampler else [])
    data = build_record(logs, sampler, ran, reserve_gib)
    gates, problems = load_gates(ROOT / "gates", "vram")
    assert problems == []
    return judge_gates(gates, data, Thresholds(vram_reserve_gib=reserve_gib, **th)), data
