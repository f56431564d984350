"""VRAM reserve: every card keeps at least `policy.vram_reserve_gib` free in every stage.

The sampler ran in the background through the other stages; this stage only reads what it kept,
writes each card's time series as evidence and judges: one gate per card (`reserve@<gpu>`), or a
single inconclusive `telemetry` gate when there is no telemetry at all.
"""

from __future__ import annotations

from typing import Any

from qualify.records import GateResult, StageResult, Verdict, one_shot
from qualify.stage import StageContext, finish, stage
from qualify.vram.sampler import Sampler, Track
from qualify.vram.series import encode

STAGE = "vram"


def _gate(name: str, verdict: Verdict, reasons: list[str], **metrics: Any) -> GateResult:
    return one_shot(STAGE, name, verdict, reasons, metrics)


def no_telemetry(why: str) -> GateResult:
    return _gate("telemetry", Verdict.INCONCLUSIVE, [f"no telemetry: {why}"])


def _mib(x: float) -> str:
    return f"{x:,.0f} MiB"


def judge_card(track: Track, stages: list[str], reserve_gib: float) -> GateResult:
    """Pass when every stage's lowest free memory is at or above the reserve."""
    card, reserve = track.card, reserve_gib * 1024
    who = f"GPU {card.gpu} ({card.name})" if card.name else f"GPU {card.gpu}"
    lows = {s: track.stages[s].min_free_mib for s in stages if s in track.stages}
    worst = min(lows, key=lambda s: lows[s] or 0.0) if lows else None
    metrics: dict[str, Any] = {
        "reserve_mib": reserve,
        "min_free_mib": lows[worst] if worst else None,
        "worst_stage": worst,
        "gaps": sum(st.gaps for st in track.stages.values()),
    }
    name = f"reserve@{card.gpu}"
    if track.lost is not None:
        lost = track.lost
        why = f"{who} disappeared during stage {lost.stage} at {lost.t_s:.1f} s: {lost.why}"
        return _gate(name, Verdict.ERROR, [why], **metrics)
    below = [
        f"{who}: stage {s} left {_mib(low)} free at its lowest, below the reserve of "
        f"{reserve_gib:g} GiB ({_mib(reserve)})"
        for s, low in lows.items()
        if low is not None and low < reserve
    ]
    if below:
        return _gate(name, Verdict.FAIL, below, **metrics)
    unseen = [s for s in stages if s not in lows]
    if unseen:
        why = f"{who}: no sample in stage(s) {', '.join(unseen)}"
        return _gate(name, Verdict.INCONCLUSIVE, [why], **metrics)
    return _gate(name, Verdict.PASS, [], **metrics)


def _card_data(track: Track, stages: list[str], verdict: Verdict) -> dict[str, Any]:
    table = {}
    for s in stages:
        st = track.stages.get(s)
        table[s] = {
            "min_free_mib": st.min_free_mib if st else None,
            "peak_power_w": st.peak_power_w if st else None,
            "samples": st.samples if st else 0,
            "gaps": st.gaps if st else 0,
        }
    c = track.card
    return {
        "gpu": c.gpu,
        "name": c.name,
        "total_mib": c.total_mib,
        "stages": table,
        "verdict": verdict.value,
    }


def _series_name(gpu: str) -> str:
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "-" for ch in gpu)
    return f"series-gpu-{safe}.jsonl"


def _write_series(ctx: StageContext, sampler: Sampler) -> list[str]:
    assert sampler.source is not None
    files: list[str] = []
    for track in sampler.tracks.values():
        header = {
            "version": 1,
            "gpu": track.card.gpu,
            "name": track.card.name,
            "uuid": track.card.uuid,
            "total_mib": track.card.total_mib,
            "source": sampler.source.name,
            "power_field": sampler.source.power_field,
            "memory_info": sampler.source.memory_info,
            "interval_ms": sampler.interval_ms,
            "t0_utc": sampler.started_utc,
        }
        files += ctx.attempt.write_bytes(_series_name(track.card.gpu), encode(header, track.rows))
    return files


def evaluate(
    sampler: Sampler | None, reserve_gib: float
) -> tuple[list[GateResult], dict[str, Any]]:
    """The gates and the `data` table of the stage, from what the sampler kept."""
    src = sampler.source if sampler else None
    data: dict[str, Any] = {
        "source": src.name if src else None,
        "power_field": src.power_field if src else None,
        "reserve_gib": reserve_gib,
        "interval_ms": {
            "target": sampler.interval_ms if sampler else None,
            "p50": None,
            "p99": None,
        },
        "cost_ms": sampler.cost_stats() if sampler else None,
        "cards": [],
        "series_files": [],
    }
    if sampler is None:
        return [no_telemetry("the GPU sampler was not running during the stages")], data
    data["interval_ms"].update(sampler.interval_stats())
    if src is None:
        return [no_telemetry(sampler.unavailable or "no telemetry source")], data
    stages = sampler.stages()
    if not stages:
        return [no_telemetry("no stage ran while the sampler was on")], data
    gates = []
    for track in sampler.tracks.values():
        gate = judge_card(track, stages, reserve_gib)
        gates.append(gate)
        data["cards"].append(_card_data(track, stages, gate.verdict))
    if not gates:
        gates.append(no_telemetry(f"{src.name} lists no GPU"))
    if sampler.failure:
        gates.append(_gate("telemetry", Verdict.ERROR, [sampler.failure]))
    elif sampler.problems:
        gates.append(_gate("telemetry", Verdict.INCONCLUSIVE, sampler.problems[:5]))
    return gates, data


@stage(STAGE)
async def vram(ctx: StageContext) -> StageResult:
    """Pass when every card kept the reserve free in every stage; inconclusive with no telemetry."""
    sampler = ctx.sampler if isinstance(ctx.sampler, Sampler) else None
    if sampler is not None:
        sampler.stop()  # idempotent; makes sure nothing is still appending
    gates, data = evaluate(sampler, ctx.candidate.policy.vram_reserve_gib)
    if sampler is not None and sampler.source is not None and sampler.tracks:
        data["series_files"] = _write_series(ctx, sampler)
    return finish(ctx, gates, data)
