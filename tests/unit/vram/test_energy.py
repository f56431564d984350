"""Energy per window from power readings: a constant series, the H200's recorded NVML series
replayed through the sampler, gaps and no telemetry said as unmeasured; the hardware record."""

from __future__ import annotations

import itertools

import pytest
from gpu_fakes import ReplayNvml
from gpu_recorded import baseline, nvml_records, replayed_sampler

from qualify.capacity.matrix import cell_energy
from qualify.capacity.parts import Energy
from qualify.capacity.record import RunRecord
from qualify.vram.energy import NO_TELEMETRY, integrate, window_energy
from qualify.vram.nvml import NvmlSource
from qualify.vram.readings import Card, Poll, Reading
from qualify.vram.sampler import Sampler


def test_constant_power_integrates_to_power_times_time() -> None:
    ts = [0.25 * i for i in range(41)]  # 0..10 s
    j, why = integrate(ts, [100.0] * len(ts), 2.0, 7.0)
    assert why is None and j == pytest.approx(500.0)
    # a window edge between samples is interpolated: a ramp 0..40 W over 10 s, window 0..10
    ramp = [4.0 * t for t in ts]
    j, _ = integrate(ts, ramp, 0.0, 10.0)
    assert j == pytest.approx(200.0)


def test_gaps_and_uncovered_windows_are_unmeasured() -> None:
    ts = [0.0, 0.25, 0.5, 5.0, 5.25]
    j, why = integrate(ts, [100.0] * 5, 0.0, 5.25, max_gap_s=1.0)
    assert j is None and why is not None and "gap" in why
    j, why = integrate(ts, [100.0] * 5, 10.0, 20.0)
    assert j is None and why == "the power samples do not cover the window"
    assert window_energy({}, 0.0, 1.0)["why"] == NO_TELEMETRY


def test_recorded_h200_power_over_a_window() -> None:
    """The recorded NVML run, replayed read by read: the sampler's energy over a window lies
    between the lowest and highest recorded power times the window, and matches a trapezoid
    over the recorded milliwatts."""
    sampler = replayed_sampler()
    recs = [r for r in nvml_records() if r["gpu"] == "0" and r["power_mw"] is not None]
    t0, t1 = recs[5]["t"], recs[-5]["t"]
    e = sampler.energy(t0, t1)
    assert e["why"] is None, e
    watts = [r["power_mw"] / 1000 for r in recs]
    assert min(watts) * (t1 - t0) <= e["joules"] <= max(watts) * (t1 - t0)
    inside = [r for r in recs if t0 <= r["t"] <= t1]
    trap = sum(
        (b["t"] - a["t"]) * (a["power_mw"] + b["power_mw"]) / 2000
        for a, b in itertools.pairwise(inside)
    )
    assert e["joules"] == pytest.approx(trap, rel=1e-6)
    assert e["mean_power_w"] == pytest.approx(e["joules"] / (t1 - t0))


def test_no_power_field_and_no_source_are_unmeasured() -> None:
    assert "unmeasured: no GPU telemetry" in str(
        Sampler(None, unavailable="no NVML").energy(0, 1)["why"]
    )

    class NoPower:
        name, power_field, memory_info = "fake", None, "v2"

        def cards(self) -> list[Card]:
            return [Card("0", "fake", 1000.0)]

        def poll(self) -> Poll:
            return Poll([Reading("0", 0.0, 500.0, 500.0, None)], [], [])

        def close(self) -> None:
            return None

    assert Sampler(NoPower()).energy(0, 1)["why"] == "unmeasured: the source reads no power"


def test_cell_energy_is_joules_over_tokens_or_unmeasured() -> None:
    runs = [
        RunRecord(completion_tokens=100, energy=Energy(joules=30.0)),
        RunRecord(completion_tokens=50, energy=Energy(joules=15.0)),
    ]
    assert cell_energy(runs).j_per_output_token == pytest.approx(0.3)
    runs[1].energy = Energy(joules=None, why=NO_TELEMETRY)
    got = cell_energy(runs)
    assert got.j_per_output_token is None and got.why == NO_TELEMETRY


def test_hardware_record_names_driver_cuda_and_cpu() -> None:
    info = {c["gpu"]: {"name": c["name"], "uuid": c["uuid"]} for c in baseline()}

    class WithSystem(ReplayNvml):
        def nvmlSystemGetDriverVersion(self) -> str:
            return "570.124.06"

        def nvmlSystemGetCudaDriverVersion_v2(self) -> int:
            return 12080

        def nvmlSystemGetNVMLVersion(self) -> bytes:
            return b"12.570.124.06"

    src = NvmlSource(nvml=WithSystem(nvml_records(), info))
    assert src.system() == {
        "driver_version": "570.124.06",
        "cuda_driver_version": "12.8",
        "nvml_version": "12.570.124.06",
    }
    header = Sampler(src).header()
    system = header["system"]
    assert isinstance(system, dict) and system["driver_version"] == "570.124.06"
    assert isinstance(system["cpu_model"], str) and system["cpu_model"]
    # a driver without these calls: None, never an error
    bare = NvmlSource(nvml=ReplayNvml(nvml_records(), info)).system()
    assert bare == {"driver_version": None, "cuda_driver_version": None, "nvml_version": None}
