"""NVML source and sampler, replaying the raw NVML values recorded on the H200."""

from __future__ import annotations

import pynvml
import pytest
from gpu_fakes import ReplayNvml
from gpu_recorded import baseline, nvml_records, proof, replay_nvml, replayed_sampler

from qualify.vram.nvml import POWER_AVERAGE, POWER_INSTANT, NvmlSource, NvmlUnavailable
from qualify.vram.readings import MIB


def test_recorded_memory_versions_differ_only_in_used() -> None:
    """On the H200, v1 `used` is v2 `used` plus the driver's reservation; `free` is the same."""
    card = baseline()[0]
    v1, v2 = card["memory_v1"], card["memory_v2"]
    assert v1["free"] == v2["free"] and v1["total"] == v2["total"]
    assert v1["used"] == v2["used"] + v2["reserved"]
    assert v2["reserved"] > 0


def test_recorded_instant_power_is_not_the_one_second_average() -> None:
    """The driver gives both power fields; GetPowerUsage is the 1 s average, not the instant."""
    card = baseline()[0]
    assert card["field_power_instant"]["ret"] == pynvml.NVML_SUCCESS
    assert card["power_usage_mw"] == card["field_power_average"]["mw"]
    assert card["field_power_instant"]["mw"] != card["field_power_average"]["mw"]


def test_source_picks_v2_memory_and_instant_power() -> None:
    """With the H200's answers, the source reads memory v2 and NVML_FI_DEV_POWER_INSTANT."""
    src = NvmlSource(nvml=replay_nvml())
    assert (src.memory_info, src.power_field) == ("v2", POWER_INSTANT)
    (card,) = src.cards()
    assert card.name == "NVIDIA H200" and card.total_mib == 143771.0
    assert card.uuid and card.uuid.startswith("GPU-")


def test_power_falls_back_to_the_average_and_says_so() -> None:
    """Without the instant field, power is GetPowerUsage and is labelled a 1 s average."""
    nv = replay_nvml(instant=False)
    src = NvmlSource(nvml=nv)
    nv.started = True
    assert src.power_field == POWER_AVERAGE
    (reading,) = src.poll().readings
    assert reading.power_w == nvml_records()[0]["power_mw"] / 1000


def test_replay_reproduces_the_live_h200_figures() -> None:
    """Per stage, the replay gives the minimum free memory, peak power and sample count that
    the live sampler computed on the H200."""
    live = proof()["sources"]["nvml"]["cards"]["0"]["stages"]
    track = replayed_sampler().figures()["0"]
    assert list(track.stages) == list(live)
    for stage, want in live.items():
        got = track.stages[stage]
        assert got.min_free_mib == want["min_free_mib"], stage
        assert got.peak_power_w == want["peak_power_w"], stage
        assert got.samples == want["samples"] and got.gaps == want["gaps"] == 0, stage


def test_minimum_free_matches_each_allocation() -> None:
    """Each alloc-N GiB stage's lowest free memory is the post-context free memory minus N GiB,
    to the MiB: the CUDA context is inside the base, the allocator rounds to 2 MiB."""
    p = proof()
    base = p["facts"]["base_free_mib"]
    track = replayed_sampler().figures()["0"]
    for step in p["facts"]["steps"]:
        low = track.stages[f"alloc-{step['gib']}GiB"].min_free_mib
        assert low is not None and abs(low - (base - step["gib"] * 1024)) < 2


def test_init_failure_names_the_nvml_error() -> None:
    """No driver: NvmlUnavailable carries NVML's own words."""
    nv = ReplayNvml(nvml_records(), {}, init_error=pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)
    with pytest.raises(NvmlUnavailable, match="NVML Shared Library Not Found"):
        NvmlSource(nvml=nv)


def test_asking_for_a_gpu_that_is_not_there_is_refused() -> None:
    """stages.vram.gpus naming index 3 on a one-GPU host says how many NVML sees."""
    with pytest.raises(NvmlUnavailable, match=r"sees 1 GPU\(s\); stages.vram.gpus names \[3\]"):
        NvmlSource(gpus=[3], nvml=replay_nvml())


def test_a_gpu_lost_mid_run_is_named_with_its_stage() -> None:
    """After 40 reads NVML answers GPU_IS_LOST: the card is marked lost in the stage it was in,
    with NVML's error, and no later sample is filed for it."""
    sampler = replayed_sampler(lose={"0": 40})
    track = sampler.figures()["0"]
    assert track.lost is not None
    assert "GpuIsLost" in track.lost.why and "GPU is lost" in track.lost.why
    assert track.lost.stage == "alloc-10GiB"
    assert sum(st.samples for st in track.stages.values()) == 40
    assert "release-10GiB" not in track.stages or track.stages["release-10GiB"].samples < 8


def test_recorded_free_is_in_bytes_and_whole_mib_on_the_card() -> None:
    """NVML's free and total are bytes; the card total is 143,771 MiB, as nvidia-smi says."""
    rec = nvml_records()[0]
    assert rec["total"] / MIB == 143771.0
