"""The figures docs/gpu/vllm/traffic/README.md prints, read back from the published evidence of
the two vLLM attach runs (knee on the trace's arrivals, replay, soak acceptance per third,
sessions, lossless) and of the repeats run."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[3]
TRAFFIC = ROOT / "docs" / "gpu" / "vllm" / "traffic"


def _result(tar: tarfile.TarFile, run: str, stage: str) -> dict[str, Any]:
    (m,) = [
        m
        for m in tar.getmembers()
        if m.name.startswith(run) and m.name.endswith(f"{stage}/attempt-001/result.json")
    ]
    f = tar.extractfile(m)
    assert f is not None
    return dict(json.load(f)["data"])


@pytest.fixture(scope="module")
def runs() -> dict[str, dict[str, dict[str, Any]]]:
    with tarfile.open(TRAFFIC / "evidence.tar.xz") as tar:
        return {r: {s: _result(tar, r, s) for s in ("capacity", "ab")} for r in ("run-1", "run-2")}


def test_the_knee_on_trace_arrivals_and_the_replay_read_back(runs: Any) -> None:
    for run, completed in (("run-1", 14.7), ("run-2", 14.2)):
        load = runs[run]["capacity"]["load"]
        assert load["knee"]["rate_rps"] == 16.0 and load["knee"]["cell"] == "trace-16rps"
        step = next(c for c in load["cells"] if c["cell"] == "trace-16rps")
        assert round(step["achieved_rps"], 1) == completed
        rates = [(c["cell"], round(c["achieved_rps"], 2)) for c in load["replay"]]
        assert rates == [("replay-1x", 3.35), ("replay-2x", 6.67)]
    goodput = [
        round(c["goodput"] * 100, 1)
        for r in ("run-1", "run-2")
        for c in runs[r]["capacity"]["load"]["replay"]
    ]
    assert goodput == [45.1, 47.9, 47.9, 46.5]


def test_the_soak_acceptance_per_third_and_the_lossless_counts_read_back(runs: Any) -> None:
    thirds = {
        r: [
            round(t["rate"] * 100, 1)
            for t in runs[r]["capacity"]["load"]["soak"]["acceptance_drift"]["thirds"]
        ]
        for r in runs
    }
    assert thirds == {"run-1": [55.2, 52.7, 53.0], "run-2": [49.4, 52.6, 48.2]}
    lossless = {
        r: (runs[r]["ab"]["lossless"]["identical"], runs[r]["ab"]["lossless"]["pairs"])
        for r in runs
    }
    assert lossless == {"run-1": (27, 27), "run-2": (18, 27)}
    turns = {r: runs[r]["capacity"]["load"]["sessions"]["goodput"] for r in runs}
    assert turns == {"run-1": pytest.approx(1 / 12), "run-2": pytest.approx(1 / 12)}


def test_the_repeats_run_reads_back() -> None:
    with tarfile.open(TRAFFIC / "repeats" / "evidence.tar.xz") as tar:
        ab = _result(tar, "evidence-repeats", "ab")
    got = ab["lossless"]
    assert (got["identical"], got["pairs"]) == (36, 36)
    assert got["repeats"] == {
        "candidate": {"pairs": 27, "identical": 21},
        "control": {"pairs": 27, "identical": 21},
    }
