"""The vram stage in the decision document: per stage, each card's minimum free memory and peak
power against the reserve, each card's lowest point, and the plot of headroom and power against
time from the sampler's series. A pure function of the stage's record (`data`) and, for the
plot, the run's telemetry files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TypedDict

from qualify.evidence.store import RunDir
from qualify.present.cells import Cell, Measure, nums
from qualify.present.plots import Panel, Plot, Series, num
from qualify.present.record import GateOutcome
from qualify.present.wording import number, quantity
from qualify.vram.record import Record
from qualify.vram.series import read_logs


def section(record: Record | None, gates: list[GateOutcome]) -> dict[str, object]:
    """What the template's VRAM section shows: per stage, each card's minimum free memory and
    peak power, against the reserve."""
    reserve, cards = (record.reserve_gib, record.cards) if record else (None, [])
    stages = list(dict.fromkeys(s for c in cards for s in c.stages))
    rows: list[dict[str, object]] = []
    for st in stages:
        cells, verdicts = [], []
        for c in cards:
            cell = c.stages.get(st)
            free = cell.min_free_mib if cell else None
            keys = ("min_free_mib", "peak_power_w", "samples")
            cells.append({k: getattr(cell, k) if cell else None for k in keys})
            verdicts.append("no data" if free is None or reserve is None else _fits(free, reserve))
        rows.append({"stage": st, "cells": cells, "reserve": _reserve_word(verdicts)})
    return {
        "vram": {
            "source": record.source if record else None,
            "overall": _overall(rows),
            "interval_ms": record.interval_ms.target if record else None,
            "reserve_gib": reserve,
            "cards": [{"label": c.who} for c in cards],
            "rows": rows,
        }
    }


MIB_PER_GIB = 1024


def free_text(free_mib: float | None, reserve_gib: float) -> str:
    """A card's lowest free memory with its headroom over the reserve; under it says so in bold
    (the A/B's lanes and the context ladder's cells)."""
    if free_mib is None:
        return "no sample"
    free = free_mib / MIB_PER_GIB
    room = free - reserve_gib
    if room < 0:
        return f"{free:,.1f} GiB (**{-room:,.1f} GiB under the {reserve_gib:g} GiB reserve**)"
    return f"{free:,.1f} GiB ({room:,.1f} over the {reserve_gib:g} GiB reserve)"


def power_text(watts: float | None) -> str:
    return "no data" if watts is None else f"{watts:,.0f} W"


def _fits(free_mib: float, reserve_gib: float) -> str:
    return "pass" if free_mib >= reserve_gib * 1024 else "fail"


def _overall(rows: list[dict[str, object]]) -> str:
    words = [r["reserve"] for r in rows]
    if not words:
        return "no data"
    if all(w == "pass on all" for w in words):
        return "pass on every card at every stage"
    return "fails: " + "; ".join(
        f"{r['stage']} {r['reserve']}" for r in rows if r["reserve"] != "pass on all"
    )


def _reserve_word(verdicts: list[str]) -> str:
    if not verdicts:
        return "no data"
    if all(v == "pass" for v in verdicts):
        return "pass on all"
    fails = verdicts.count("fail")
    if fails:
        return "fail on all" if fails == len(verdicts) else f"fail on {fails} of {len(verdicts)}"
    return "no data"


class CardMinimum(TypedDict):
    """A card's lowest free memory over every stage, and whether it kept the reserve."""

    gpu: str
    name: str
    min_free_mib: float | None
    verdict: str


def card_minimums(record: Record | None) -> list[CardMinimum]:
    """Each card's lowest free memory over every stage, against the reserve."""
    if record is None:
        return []
    out: list[CardMinimum] = []
    for c in record.cards:
        frees = [f.min_free_mib for f in c.stages.values() if f.min_free_mib is not None]
        low = min(frees) if frees else None
        verdict = "no data" if low is None else _fits(low, record.reserve_gib)
        out.append({"gpu": c.gpu, "name": c.name, "min_free_mib": low, "verdict": verdict})
    return out


def _legacy_series(run: RunDir, files: list[str], here: Path | None) -> dict[str, Series]:
    """Per card from an older layout: `series-gpu-N.jsonl` in the vram attempt, a header line
    then rows `[t_s, stage, free_mib, used_mib, power_w, n]`."""
    out: dict[str, Series] = {}
    for name in files:
        path = run.path / name if "/" in name or here is None else here / name
        try:
            lines = path.read_text().splitlines()
        except OSError:
            continue
        head = json.loads(lines[0]) if lines else {}
        cols = head.get("columns") if isinstance(head, dict) else None
        if not isinstance(cols, list) or cols[:3] != ["t_s", "stage", "free_mib"]:
            continue
        rows = [json.loads(x) for x in lines[1:] if x.strip()]
        card = f"GPU {head.get('gpu')}"
        out[card] = [[r[0], r[1], r[2], r[4] if len(r) > 4 else None] for r in rows]
    return out


def _samples(run: RunDir, files: list[str], here: Path | None) -> dict[str, Series]:
    """`[t_s, stage, free_mib, power_w]` per card, over every telemetry attempt in turn."""
    out: dict[str, Series] = {}
    offset = 0.0
    for log in read_logs(run):
        end = offset
        for line in log.lines:
            if isinstance(line, list) and len(line) >= 6:
                t = float(line[0]) + offset
                out.setdefault(f"GPU {line[2]}", []).append([t, line[1], line[3], line[5]])
                end = max(end, t)
        offset = end
    return out or _legacy_series(run, files, here)


def plots(run: RunDir, record: Record | None, here: Path | None) -> list[Plot]:
    """Free memory and power against time per card, stage bands, the reserve line."""
    reserve = record.reserve_gib if record is not None else None
    files = list(record.series_files) if record is not None else []
    base = reserve * 1024 if reserve is not None else 0.0
    label = "headroom over the reserve (MiB)" if reserve is not None else "free (MiB)"
    free, power = Panel(label, zoom=True), Panel("power (W)")
    if reserve is not None:
        free.hlines["reserve"] = 0.0
    lows: list[tuple[float, str]] = []  # each sample's headroom, and where
    for card, rows in _samples(run, files, here).items():
        kept = [r for r in rows if num(r[2]) is not None]
        free.series[card] = [(float(r[0]), float(r[2]) - base) for r in kept]
        lows += [(float(r[2]) - base, f"{card}, {r[1]}") for r in kept]
        pw = [(float(r[0]), float(r[3])) for r in rows if num(r[3]) is not None]
        if pw:
            power.series[card] = pw
        if not free.bands:
            free.bands = _stage_bands(rows)
    if lows and reserve is not None:
        low, where = min(lows, key=lambda x: x[0])  # the first of the lowest
        word = "above" if low >= 0 else "BELOW"
        free.note = f"lowest: {abs(low):,.0f} MiB {word} the {base:,.0f} MiB reserve ({where})"
    plot = Plot("vram-series.png", "GPU memory and power", "seconds", [free, power])
    plot.missing = "no GPU telemetry was recorded"
    return [plot]


def _stage_bands(rows: Series) -> list[tuple[float, float, str]]:
    bands: list[tuple[float, float, str]] = []
    for r in rows:
        t, stage = float(r[0]), str(r[1])
        if bands and bands[-1][2] == stage:
            bands[-1] = (bands[-1][0], t, stage)
        else:
            bands.append((t, t, stage))
    return bands


def figures(vram: Record | None, gates: list[GateOutcome]) -> list[str]:
    """Each card's lowest free memory against the reserve, when telemetry recorded cards."""
    cards = card_minimums(vram)
    if vram is None or not cards:
        return []
    reserve = number(vram.reserve_gib * 1024, 0)
    return [
        "minimum free VRAM: "
        + "; ".join(
            f"GPU {c['gpu']} {quantity(c['min_free_mib'], 'MiB', 0)} ({c['verdict']})"
            for c in cards
        )
        + f" against a {reserve} MiB reserve"
    ]


def diff_cells(rec: Record) -> list[Cell]:
    """Per card and stage: the lowest free memory seen (one reading per run)."""
    out: list[Cell] = []
    for card in rec.cards:
        setting: dict[str, object] = {"name": card.name, "total_mib": card.total_mib}
        for stage, s in sorted(card.stages.items()):
            c = Cell("vram", f"gpu {card.gpu} {stage}", setting)
            c.measures["min_free_mib"] = Measure("MiB", "higher", nums([s.min_free_mib]))
            out.append(c)
    return out
