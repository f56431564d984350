"""VRAM's judges: the reserve on every card in every stage, and whether the telemetry behind
it can be trusted (a sampler that broke, a source that did not answer, too many missed ticks).

The reserve and the gap bound are the house's (`Thresholds.vram_reserve_gib`,
`Thresholds.vram_max_gap_fraction`), never the candidate's.
"""

from __future__ import annotations

from typing import Any

from qualify.gates.files import Params
from qualify.gates.registry import Judged, judge
from qualify.gates.thresholds import Thresholds
from qualify.records import Verdict


class ReserveParams(Params):
    """No knobs: the reserve is policy."""


class TelemetryParams(Params):
    """No knobs: the gap bound is policy."""


def _who(card: dict[str, Any]) -> str:
    return (
        f"GPU {card.get('gpu')} ({card['name']})" if card.get("name") else f"GPU {card.get('gpu')}"
    )


def _mib(x: float) -> str:
    return f"{x:,.0f} MiB"


def _card(card: dict[str, Any], stages: list[str], reserve_gib: float) -> Judged:
    reserve, who = reserve_gib * 1024, _who(card)
    figs: dict[str, dict[str, Any]] = card.get("stages") or {}
    lows = {s: f["min_free_mib"] for s, f in figs.items() if f.get("min_free_mib") is not None}
    worst = min(lows, key=lambda s: lows[s]) if lows else None
    metrics = {
        "reserve_mib": reserve,
        "min_free_mib": lows[worst] if worst else None,
        "worst_stage": worst,
    }
    part = str(card.get("gpu"))
    lost = card.get("lost")
    if lost:
        why = (
            f"{who} disappeared during stage {lost.get('stage')} "
            f"(telemetry attempt {lost.get('attempt')}, at {lost.get('t_s', 0.0):.1f} s): "
            f"{lost.get('why')}"
        )
        return Judged(Verdict.ERROR, [why], metrics, part)
    below = [
        f"{who}: stage {s} left {_mib(low)} free at its lowest, below the reserve of "
        f"{reserve_gib:g} GiB ({_mib(reserve)})"
        for s, low in lows.items()
        if low < reserve
    ]
    if below:
        return Judged(Verdict.FAIL, below, metrics, part)
    unseen = [s for s in stages if s not in lows]
    if unseen:
        why = f"{who}: no sample in stage(s) {', '.join(unseen)}"
        return Judged(Verdict.INCONCLUSIVE, [why], metrics, part)
    return Judged(Verdict.PASS, [], metrics, part)


@judge("vram", "vram-reserve", ReserveParams)
def reserve(data: dict[str, Any], params: ReserveParams, thresholds: Thresholds) -> list[Judged]:
    """One verdict per card: every stage that ran kept `vram_reserve_gib` free at its lowest."""
    cards = data.get("cards") or []
    if not cards:
        why = data.get("no_telemetry") or "the telemetry lists no card"
        return [Judged(Verdict.INCONCLUSIVE, [f"no card was sampled: {why}"])]
    stages = [str(s) for s in data.get("stages") or []]
    return [_card(c, stages, thresholds.vram_reserve_gib) for c in cards]


def _gaps(data: dict[str, Any], bound: float) -> tuple[list[str], float]:
    over, worst = [], 0.0
    for card in data.get("cards") or []:
        for s, f in (card.get("stages") or {}).items():
            samples, missed = int(f.get("samples") or 0), int(f.get("missed") or 0)
            share = missed / (samples + missed) if samples + missed else 0.0
            worst = max(worst, share)
            if share > bound:
                over.append(
                    f"{_who(card)}: stage {s} missed {missed} of {samples + missed} sampler "
                    f"intervals ({share:.1%}), above the bound of {bound:.1%}"
                )
    return over, worst


@judge("vram", "vram-telemetry", TelemetryParams)
def telemetry(
    data: dict[str, Any], params: TelemetryParams, thresholds: Thresholds
) -> list[Judged]:
    """`error` when a sampler broke; `inconclusive` with no telemetry, a source that did not
    answer at start, or missed intervals beyond `vram_max_gap_fraction`; else `pass`."""
    logs: list[dict[str, Any]] = data.get("telemetry") or []
    if not logs:
        return [Judged(Verdict.INCONCLUSIVE, [f"no telemetry: {data.get('no_telemetry')}"])]
    failures = [
        f"telemetry attempt {t['attempt']}: {t['failure']}" for t in logs if t.get("failure")
    ]
    over, worst = _gaps(data, thresholds.vram_max_gap_fraction)
    metrics = {"worst_gap_fraction": round(worst, 4), "attempts": len(logs)}
    if failures:
        return [Judged(Verdict.ERROR, failures, metrics)]
    problems = [
        f"telemetry attempt {t['attempt']}: {p}"
        for t in logs
        for p in t.get("start_problems") or []
    ]
    if problems or over:
        return [Judged(Verdict.INCONCLUSIVE, [*problems, *over], metrics)]
    return [Judged(Verdict.PASS, [], metrics)]
