"""The nvidia-smi CSV stream: the lines recorded on the H200, parsed and streamed."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
from gpu_recorded import DATA, proof

from qualify.records import Verdict
from qualify.vram.sampler import Sampler
from qualify.vram.smi import POWER_INSTANT, SmiSource, SmiUnavailable, lost_bus, parse_line
from qualify.vram.stage import evaluate

LINES = (DATA / "smi-stream.csv").read_text().splitlines()


def test_every_recorded_line_parses() -> None:
    """Each recorded line gives GPU 0, its name, total, free, and the instant power."""
    parsed = [parse_line(line, 0.0) for line in LINES]
    assert all(p is not None for p in parsed)
    readings = [p[0] for p in parsed if p]
    card, bus = parsed[0][1], parsed[0][2]  # type: ignore[index]
    assert (card.gpu, card.name, card.total_mib, bus) == (
        "0",
        "NVIDIA H200",
        143771.0,
        "00000000:00:06.0",
    )
    assert min(r.free_mib for r in readings) == 60226.0
    first = LINES[0].split(", ")
    assert readings[0].power_w == float(first[6])  # power.draw.instant, not power.draw


def test_recorded_figures_agree_with_the_live_stream() -> None:
    """The lowest free memory and highest power in the file are what the live nvidia-smi
    sampler reported for its stages on the H200."""
    stages = proof()["sources"]["nvidia-smi"]["cards"]["0"]["stages"]
    readings = [p[0] for p in (parse_line(line, 0.0) for line in LINES) if p]
    assert min(r.free_mib for r in readings) == min(s["min_free_mib"] for s in stages.values())
    peak = max(r.power_w or 0.0 for r in readings)
    assert peak == max(s["peak_power_w"] for s in stages.values())


def test_not_available_values_fall_back_or_drop() -> None:
    """`[N/A]` instant power falls back to power.draw; a line without free memory is no sample."""
    na = (
        "0, 00000000:00:06.0, 2026/12/02 18:45:20.469, 143156, 0, 143771, [N/A], 94.80, NVIDIA H200"
    )
    got = parse_line(na, 0.0)
    assert got is not None and got[0].power_w == 94.80
    bad = na.replace("143156", "[Not Supported]")
    assert parse_line(bad, 0.0) is None
    assert parse_line("index, pci.bus_id, timestamp", 0.0) is None


def test_lost_line_is_recognised() -> None:
    """nvidia-smi's message for a lost GPU is recognised; an ordinary line is not."""
    assert lost_bus("Unable to determine the device handle for GPU00000000:00:06.0: GPU is lost.")
    assert lost_bus(LINES[0]) is None


@pytest.fixture
def fake_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    script = Path(__file__).parent / "gpu_fake_smi.py"
    binary = tmp_path / "nvidia-smi"
    binary.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{script}" "$@"\n')
    binary.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    return binary


def _stream(lines: int, lost: bool, monkeypatch: pytest.MonkeyPatch) -> Sampler:
    monkeypatch.setenv("FAKE_SMI_LINES", str(lines))
    if lost:
        monkeypatch.setenv("FAKE_SMI_LOST", "1")
    src = SmiSource(20)
    sampler = Sampler(src, 20).start()
    sampler.mark("replay")
    deadline = time.monotonic() + 20
    track = sampler.tracks["0"]
    while time.monotonic() < deadline:
        stats = track.stages.get("replay")
        done = track.lost is not None if lost else bool(stats and stats.samples >= lines)
        if done:
            break
        time.sleep(0.05)
    sampler.stop()
    return sampler


def test_stream_through_the_sampler(fake_smi: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A real nvidia-smi-like process streaming the recorded lines: every line after the first
    mark is filed, the instant power is named, and the reserve passes at 3 GiB."""
    sampler = _stream(40, False, monkeypatch)
    assert sampler.source is not None and sampler.source.power_field == POWER_INSTANT
    stats = sampler.tracks["0"].stages["replay"]
    expected = min(p[0].free_mib for p in (parse_line(x, 0.0) for x in LINES[:40]) if p)
    assert stats.samples >= 38 and stats.min_free_mib is not None
    assert stats.min_free_mib >= expected
    gates, data = evaluate(sampler, 3.0)
    assert [g.verdict for g in gates] == [Verdict.PASS]
    assert data["source"] == "nvidia-smi"


def test_stream_reports_a_lost_gpu(fake_smi: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """When nvidia-smi says the GPU is lost, the card's gate is error and names the stage."""
    sampler = _stream(10, True, monkeypatch)
    gates, _ = evaluate(sampler, 3.0)
    (gate,) = gates
    assert gate.verdict is Verdict.ERROR
    assert "disappeared during stage replay" in gate.reasons[0]
    assert "GPU is lost" in gate.reasons[0]


def test_missing_binary_is_unavailable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No nvidia-smi on PATH: SmiUnavailable says so."""
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SmiUnavailable, match="not on PATH"):
        SmiSource(250)
