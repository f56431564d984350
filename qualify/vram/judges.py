"""VRAM's judges: the reserve on every card in every stage, and whether the telemetry behind
it can be trusted (a sampler that broke, a source that did not answer, too many missed ticks).

The reserve and the gap bound are the house's (`Thresholds.vram_reserve_gib`,
`Thresholds.vram_max_gap_fraction`), never the candidate's.
"""

from __future__ import annotations

from qualify.gates.files import Params
from qualify.gates.registry import Judged, judge
from qualify.gates.thresholds import Thresholds
from qualify.records import Verdict
from qualify.vram.record import Card, Record


class ReserveParams(Params):
    """No knobs: the reserve is policy."""


class TelemetryParams(Params):
    """No knobs: the gap bound is policy."""


def _mib(x: float) -> str:
    return f"{x:,.0f} MiB"


def _card(card: Card, stages: list[str], reserve_gib: float) -> Judged:
    reserve, who, part = reserve_gib * 1024, card.who, card.gpu
    lows = {s: f.min_free_mib for s, f in card.stages.items() if f.min_free_mib is not None}
    worst = min(lows, key=lambda s: lows[s]) if lows else None
    metrics = {
        "reserve_mib": reserve,
        "min_free_mib": lows[worst] if worst else None,
        "worst_stage": worst,
    }
    if lost := card.lost:
        why = (
            f"{who} disappeared during stage {lost.stage} "
            f"(telemetry attempt {lost.attempt}, at {lost.t_s:.1f} s): {lost.why}"
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
    if unseen := [s for s in stages if s not in lows]:
        why = f"{who}: no sample in stage(s) {', '.join(unseen)}"
        return Judged(Verdict.INCONCLUSIVE, [why], metrics, part)
    return Judged(Verdict.PASS, [], metrics, part)


@judge("vram", "vram-reserve", ReserveParams)
def reserve(record: Record, params: ReserveParams, thresholds: Thresholds) -> list[Judged]:
    """One verdict per card: every stage that ran kept `vram_reserve_gib` free at its lowest."""
    if not record.cards:
        why = record.no_telemetry or "the telemetry lists no card"
        return [Judged(Verdict.INCONCLUSIVE, [f"no card was sampled: {why}"])]
    return [_card(c, record.stages, thresholds.vram_reserve_gib) for c in record.cards]


def _gaps(record: Record, bound: float) -> tuple[list[str], float]:
    over, worst = [], 0.0
    for card in record.cards:
        for s, f in card.stages.items():
            samples, missed = f.samples, f.missed
            share = missed / (samples + missed) if samples + missed else 0.0
            worst = max(worst, share)
            if share > bound:
                over.append(
                    f"{card.who}: stage {s} missed {missed} of {samples + missed} sampler "
                    f"intervals ({share:.1%}), above the bound of {bound:.1%}"
                )
    return over, worst


@judge("vram", "vram-telemetry", TelemetryParams)
def telemetry(record: Record, params: TelemetryParams, thresholds: Thresholds) -> list[Judged]:
    """`error` when a sampler broke; `inconclusive` with no telemetry, a source that did not
    answer at start, or missed intervals beyond `vram_max_gap_fraction`; else `pass`."""
    logs = record.telemetry
    if not logs:
        return [Judged(Verdict.INCONCLUSIVE, [f"no telemetry: {record.no_telemetry}"])]
    failures = [f"telemetry attempt {t.attempt}: {t.failure}" for t in logs if t.failure]
    over, worst = _gaps(record, thresholds.vram_max_gap_fraction)
    metrics = {"worst_gap_fraction": round(worst, 4), "attempts": len(logs)}
    if failures:
        return [Judged(Verdict.ERROR, failures, metrics)]
    problems = [f"telemetry attempt {t.attempt}: {p}" for t in logs for p in t.start_problems]
    if problems or over:
        return [Judged(Verdict.INCONCLUSIVE, [*problems, *over], metrics)]
    return [Judged(Verdict.PASS, [], metrics)]
