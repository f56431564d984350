"""Per lane and card: the A/B drive marks each lane's timed runs in the GPU sampler's log, each
run keeps each card's lowest free memory and mean power over its window, and the decision's A/B
section shows them per lane against the house reserve ("no GPU telemetry" once without it)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from ab_fakes import FakeEngine, context
from fake_parts import FakeParts  # type: ignore[import-not-found]

from qualify.ab.record import Record
from qualify.ab.section import lane_gpu, lane_power
from qualify.ab.stage import ab
from qualify.decision import document


def _engines() -> dict[str, FakeEngine]:
    return {
        "candidate": FakeEngine(tokens_per_chunk=4, chunks=8, spec_counters=True),
        "control": FakeEngine(tokens_per_chunk=1, chunks=32),
    }


def test_each_lanes_timed_runs_are_marked_and_keep_each_cards_figures(tmp_path: Path) -> None:
    ctx = context(tmp_path, _engines())
    parts = FakeParts(70_000.0, {"0": (0.0, 300.0)}, samples=5)
    ctx.sampler = parts
    result = asyncio.run(ab(ctx))
    names = [n for n, _ in parts.marks]
    assert names == [
        x for r in (1, 2, 3) for lane in ("candidate", "control") for x in (f"{lane}-run{r}", None)
    ]
    # the window of each run is the one its marks bound (gpu_note asks one empty window last)
    assert parts.windows[:-1] == parts.bounds()
    record = Record.model_validate(result.data)
    assert record.gpu is not None and record.gpu.reserve_gib == 3.0 and record.gpu.why is None
    for key in ("candidate", "control"):
        for run in record.lanes[key].runs:
            assert run.gpu is not None and run.gpu.part == f"{key}-run{run.run}"
            assert run.gpu.cards["0"].min_free_mib == 70_000.0


def test_without_telemetry_runs_have_no_gpu_and_the_record_says_why(tmp_path: Path) -> None:
    result = asyncio.run(ab(context(tmp_path, _engines())))
    record = Record.model_validate(result.data)
    assert all(r.gpu is None for lane in record.lanes.values() for r in lane.runs)
    assert record.gpu is not None
    assert record.gpu.why == "no GPU telemetry (no sampler in this run)"
    assert lane_gpu(record) == {"reserve_gib": 3.0, "rows": []}


def _run(n: int, free: float, joules: float) -> dict[str, Any]:
    return {
        "run": n,
        "energy": {"joules": joules, "window_s": 2.0, "cards": {"0": {"joules": joules}}},
        "gpu": {
            "part": f"x-run{n}",
            "cards": {"0": {"min_free_mib": free, "mean_power_w": joules / 2, "samples": 8}},
        },
    }


def _record() -> Record:
    return Record.model_validate(
        {
            "runs": 2,
            "lanes": {
                "candidate": {
                    "name": "spec",
                    "runs": [_run(1, 2560.0, 900.0), _run(2, 9e4, 700.0)],
                },
                "control": {"name": "plain", "runs": [_run(1, 9e4, 500.0), _run(2, 8e4, 500.0)]},
            },
            "gpu": {"reserve_gib": 3.0},
        }
    )


def test_the_lane_table_reads_the_lowest_free_memory_and_the_energy_windows_mean_power() -> None:
    """The candidate's lowest point (2.5 GiB) is under the 3 GiB reserve and says so; mean
    power is the lane's joules over its windows' seconds, as the power line says it."""
    gpu = lane_gpu(_record())
    spec, plain = gpu["rows"]
    assert (spec["lane"], spec["gpu"], spec["runs"]) == ("spec", "0", 2)
    assert spec["free"] == "2.5 GiB (**0.5 GiB under the 3 GiB reserve**)"
    assert spec["power"] == "400 W"  # (900 + 700) J over 4 s
    assert plain["free"] == "78.1 GiB (75.1 over the 3 GiB reserve)"
    assert plain["power"] == "250 W"
    assert [c["watts"] for lane in lane_power(_record()) for c in lane["cards"]] == [400.0, 250.0]


def test_an_older_record_shows_no_lane_table_and_the_document_reads_it_back() -> None:
    older = Record.model_validate({"runs": 1, "lanes": {"candidate": {"name": "a"}}})
    assert lane_gpu(older) == {"reserve_gib": None, "rows": []}
    again = Record.model_validate(_record().model_dump(mode="json"))
    shown = document.stage_sections({"ab": again}, [])["ab_gpu"]
    assert shown["rows"][0]["free"].startswith("2.5 GiB (**0.5 GiB under")
