"""The per-rung and per-lane GPU tables reach the rendered document: the recorded H200 roomy
run rendered with a context record and an A/B record that hold per-card figures (a rung and a
lane under the reserve), and with records that say there was no telemetry."""

from __future__ import annotations

from typing import Any

import pytest
from test_decision_first_screen import _roomy

from qualify.ab.section import lane_gpu
from qualify.context.section import context_rows
from qualify.decision import document
from qualify.decision.conclude import setup
from qualify.decision.render import preview
from qualify.evidence.store import RunDir
from qualify.present.reading import run_view

GIB = 1024.0


def _context(rows: list[dict[str, Any]], why: str | None = None) -> Any:
    from qualify.context.record import Record

    gpu: dict[str, Any] = {"reserve_gib": 3.0}
    if why:
        gpu["why"] = why
    rung = {"target": 4096, "planned_tokens": 4096, "clamped": False, "window": 8192}
    return Record.model_validate({"targets": [rung], "rows": rows, "gpu": gpu})


def _row(p: str, free_mib: float | None, watts: float | None) -> dict[str, Any]:
    row: dict[str, Any] = {
        "target": 4096,
        "pass": p,
        "content": "prose",
        "concurrency": 1,
        "planned_tokens": 4096,
    }
    if free_mib is not None:
        cards = {"0": {"min_free_mib": free_mib, "mean_power_w": watts, "samples": 40}}
        row["gpu"] = {"part": f"ctx-4096-prose-c1-{p}", "cards": cards}
    return row


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> Any:
    run = _roomy(tmp_path_factory.mktemp("gpu"))
    record = preview(run, setup(None))

    def render(ctx_record: Any, ab_gpu: dict[str, Any] | None = None) -> str:
        ctx = document.context(run_view(run, record), record)
        ctx["context"]["gpu"] = context_rows(ctx_record)["gpu"]
        if ab_gpu is not None:
            ctx["ab_gpu"] = ab_gpu
        return document.environment().get_template(document.TEMPLATE).render(**ctx)

    return run, render


def test_the_per_rung_table_is_in_the_document(rendered: tuple[RunDir, Any]) -> None:
    _, render = rendered
    text = render(_context([_row("cold", 2 * GIB, 655.0), _row("warm", 50 * GIB, 410.4)]))
    line = next(x for x in text.splitlines() if x.startswith("| 4,096 | 0 |"))
    assert "**1.0 GiB under the 3 GiB reserve**" in line and "655 W" in line and "410 W" in line
    assert "3.0 GiB house reserve" in text


def test_no_telemetry_adds_no_line_and_an_older_record_adds_nothing(
    rendered: tuple[RunDir, Any],
) -> None:
    """Without telemetry the hardware line and the VRAM section already say so: the context and
    A/B sections add no table and no line of their own (the demo document stays under 200)."""
    _, render = rendered
    none = render(_context([_row("cold", None, None)], "no GPU telemetry (NVML: no driver)"))
    assert "no GPU telemetry (NVML: no driver)" not in none
    assert "Per card over each rung" not in none
    older = render(_context([_row("cold", None, None)]).model_copy(update={"gpu": None}))
    assert "Per card over each rung" not in older


def test_the_per_lane_table_is_in_the_document(rendered: tuple[RunDir, Any]) -> None:
    from qualify.ab.record import Record

    def run(n: int, free: float, joules: float) -> dict[str, Any]:
        cards = {"0": {"min_free_mib": free, "mean_power_w": joules / 2, "samples": 8}}
        energy = {"joules": joules, "window_s": 2.0, "cards": {"0": {"joules": joules}}}
        return {"run": n, "energy": energy, "gpu": {"part": f"x-run{n}", "cards": cards}}

    lanes = {
        "candidate": {"name": "spec", "runs": [run(1, 2560.0, 900.0), run(2, 9e4, 700.0)]},
        "control": {"name": "plain", "runs": [run(1, 9e4, 500.0), run(2, 8e4, 500.0)]},
    }
    ab = Record.model_validate({"runs": 2, "lanes": lanes, "gpu": {"reserve_gib": 3.0}})
    _, render = rendered
    text = render(_context([]), lane_gpu(ab))
    line = next(x for x in text.splitlines() if x.startswith("| `spec` | 0 |"))
    assert "**0.5 GiB under the 3 GiB reserve**" in line and "400 W" in line
