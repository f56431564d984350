"""Per rung and card: the ladder marks each cell's timed sends in the GPU sampler's log, each row
keeps each card's lowest free memory and mean power over them, and the decision's context
section shows them against the house reserve ("no GPU telemetry" once without telemetry)."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from context_fake import FakeLlama  # type: ignore[import-not-found]
from fake_parts import FakeParts  # type: ignore[import-not-found]

from qualify.context.record import Record
from qualify.context.section import context_rows
from qualify.context.settings import ContextSettings
from qualify.context.sizing import Counter
from qualify.context.stage import Ladder, plan_targets
from qualify.decision import document
from qualify.httpclient.client import Client, Exchange
from qualify.serving.dialects import LLAMACPP
from qualify.serving.sender import Sender
from qualify.vram.sampler import Sampler, gpu_note


def _keep(label: str, ex: Exchange) -> list[str]:
    return [label]


def _ladder(client: Client, parts: FakeParts | None, tmp: Path) -> Ladder:
    s = ContextSettings(
        targets=[1500], concurrency=[1, 2], tasks=[], tool_battery=False, content=["prose"]
    )
    attempt = SimpleNamespace(write_json=lambda name, obj: None, path=tmp)
    ctx: Any = SimpleNamespace(attempt=attempt, gates_dir=tmp, keep=_keep)
    drv = Sender(client, LLAMACPP, {"model": "m", "max_tokens": 32}, 30.0, 3.0, _keep)
    counter = Counter(client, "llama.cpp", "m", {})
    return Ladder(ctx, s, counter, drv, random.Random(1), 1, parts=parts)


def _run(client: Client, parts: FakeParts | None, tmp: Path) -> Ladder:
    ladder = _ladder(client, parts, tmp)
    asyncio.run(ladder.rung(plan_targets([1500], 8192, 512)[0], "prose"))
    return ladder


def test_each_cell_is_marked_and_its_row_keeps_each_cards_figures(
    fake: FakeLlama, fake_client: Callable[[], Client], tmp_path: Path
) -> None:
    """Warm then cold, at concurrency 1 and 2: four cells, each opened with its name and closed
    with None in the sampler's log, and each row's `gpu` the window over its sends."""
    parts = FakeParts(60_000.0, {"0": (0.0, 250.0), "1": (1000.0, 500.0)}, samples=3)
    ladder = _run(fake_client(), parts, tmp_path)
    names = [n for n, _ in parts.marks]
    assert names == [
        "ctx-1500-prose-c1-warm",
        None,
        "ctx-1500-prose-c2-warm",
        None,
        "ctx-1500-prose-c1-cold",
        None,
        "ctx-1500-prose-c2-cold",
        None,
    ]
    assert parts.windows == parts.bounds()
    assert all(a is not None and b is not None and a < b for a, b in parts.windows)
    rows = Record.model_validate({"rows": ladder.rows}).rows
    assert [(r.pass_, r.concurrency) for r in rows] == [
        ("warm", 1),
        ("warm", 2),
        ("cold", 1),
        ("cold", 2),
    ]
    for r in rows:
        assert r.gpu is not None and r.gpu.part.endswith(f"c{r.concurrency}-{r.pass_}")
        assert r.gpu.cards["0"].min_free_mib == 60_000.0
        assert r.gpu.cards["1"].mean_power_w == 500.0


def test_without_a_sampler_rows_have_no_gpu_and_the_record_says_why(
    fake: FakeLlama, fake_client: Callable[[], Client], tmp_path: Path
) -> None:
    ladder = _run(fake_client(), None, tmp_path)
    assert all("gpu" not in row.model_fields_set for row in ladder.rows)
    assert gpu_note(None, 3.0).model_dump() == {
        "reserve_gib": 3.0,
        "why": "no GPU telemetry (no sampler in this run)",
    }
    # a sampler with no source (the CPU demo) says why it has none
    blind = Sampler(None, unavailable="NVML: no driver")
    assert gpu_note(blind, 3.0).why == "no GPU telemetry (NVML: no driver)"


def _row(pass_: str, c: int, free: float | None, watts: float | None) -> dict[str, Any]:
    row: dict[str, Any] = {
        "target": 8192,
        "pass": pass_,
        "content": "prose",
        "concurrency": c,
        "planned_tokens": 8192,
    }
    if free is not None:
        row["gpu"] = {
            "part": f"ctx-8192-prose-c{c}-{pass_}",
            "cards": {"0": {"min_free_mib": free, "mean_power_w": watts, "samples": 4}},
        }
    return row


def _record(rows: list[dict[str, Any]], why: str | None = None) -> Record:
    rung = {"target": 16384, "planned_tokens": 8192, "clamped": True, "window": 8704}
    return Record.model_validate(
        {"targets": [rung], "rows": rows, "gpu": {"reserve_gib": 3.0, "why": why}}
    )


def test_the_per_rung_table_reads_headroom_against_the_reserve_and_mean_power() -> None:
    """Cold and warm side by side per rung; a rung whose lowest free memory is under the
    3 GiB reserve shows by how much, in bold."""
    record = _record(
        [
            _row("warm", 1, 50 * 1024.0, 410.4),
            _row("cold", 1, 2 * 1024.0, 655.0),
        ]
    )
    gpu = context_rows(record)["gpu"]
    assert gpu["note"] is None and gpu["reserve_gib"] == 3.0
    [row] = gpu["rows"]
    assert (row["target"], row["clamped_to"], row["gpu"]) == (16384, 8192, "0")
    assert row["warm_free"] == "50.0 GiB (47.0 over the 3 GiB reserve)"
    assert row["cold_free"] == "2.0 GiB (**1.0 GiB under the 3 GiB reserve**)"
    assert row["under"] is True
    assert (row["warm_power"], row["cold_power"]) == ("410 W", "655 W")
    assert (row["cold_min_free_mib"], row["warm_mean_power_w"]) == (2048.0, 410.4)


def test_no_gpu_telemetry_is_said_once_and_an_older_record_shows_nothing() -> None:
    rows = [_row("warm", 1, None, None), _row("cold", 1, None, None)]
    gpu = context_rows(_record(rows, "no GPU telemetry (NVML: no driver)"))["gpu"]
    assert gpu == {
        "note": "no GPU telemetry (NVML: no driver)",
        "reserve_gib": 3.0,
        "rows": [],
    }
    older = Record.model_validate({"rows": rows})  # a build that did not mark the cells
    assert context_rows(older)["gpu"] == {"note": None, "reserve_gib": None, "rows": []}
    assert "gpu" not in older.model_dump(mode="json", by_alias=True)


def test_the_document_reads_the_per_rung_figures_back_from_the_record() -> None:
    record = _record([_row("warm", 1, 40 * 1024.0, 300.0), _row("cold", 1, 41 * 1024.0, 320.0)])
    again = Record.model_validate(record.model_dump(mode="json", by_alias=True))
    shown = document.stage_sections({"context": again}, [])["context"]["gpu"]
    [row] = shown["rows"]
    assert row["warm_free"] == "40.0 GiB (37.0 over the 3 GiB reserve)"
    assert row["cold_power"] == "320 W" and row["under"] is False
