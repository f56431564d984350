"""VRAM: every card keeps the house's reserve free in every stage the run ran.

The sampler ran in the background through the other stages, writing every sample into the
run's `telemetry/` evidence as it went. This stage stops it; its record (`qualify.vram.record`)
is what the rebuild (`qualify.vram.rebuild`) reads back from *every* telemetry attempt of the
run, this process's and any earlier one's (a `--resume` keeps the stages an earlier attempt
ran, so their samples are judged too), judged by the gates in `gates/vram/`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from qualify.records import StageResult, Verdict
from qualify.stage import StageContext, finish
from qualify.vram.record import Cost, Hardware, Interval, Record, Telemetry
from qualify.vram.sampler import Sampler, hardware
from qualify.vram.series import Log, figures, marked_stages

STAGE = "vram"


def ran(listed: list[str], results: Callable[[str], Iterable[StageResult | None]]) -> list[str]:
    """The stages (other than vram) that ran in some attempt (`results`: each attempt's result,
    None where it left none): an attempt that left no result (its process was killed) ran; one
    recorded as "not run: ..." did not."""
    return [
        name
        for name in listed
        if name != STAGE
        and any(
            r is None
            or r.verdict is not Verdict.SKIPPED
            or not (r.reasons and r.reasons[0].startswith("not run:"))
            for r in results(name)
        )
    ]


def _telemetry(log: Log) -> Telemetry:
    summary = log.summary or {}
    return Telemetry(
        attempt=log.attempt,
        **{k: log.header.get(k) for k in ("source", "power_field", "memory_info", "interval_ms")},
        start_problems=log.header.get("start_problems") or [],
        stopped=log.summary is not None,
        missed_scrapes=summary.get("missed_scrapes", 0),
        missed_examples=summary.get("missed_examples") or [],
        failure=summary.get("failure"),
        files=[f"telemetry/{log.path.name}/{f}" for f in log.files],
    )


def build_record(
    logs: list[Log], sampler: Sampler | None, stages: list[str], reserve_gib: float
) -> Record:
    """The stage's record: the figures of every card in every stage, over every attempt."""
    src = sampler.source if sampler else None
    last = logs[-1].header if logs else {}
    no_telemetry = None
    if not logs:
        no_telemetry = (
            "the GPU sampler was not running during the stages"
            if sampler is None
            else sampler.unavailable or "no stage ran while the sampler was on"
        )
    hw = last.get("system") or (hardware(src) if sampler else None)
    telemetry = [_telemetry(log) for log in logs]
    return Record(
        source=src.name if src else last.get("source"),
        hardware=None if hw is None else Hardware.model_validate(hw),
        power_field=src.power_field if src else last.get("power_field"),
        reserve_gib=reserve_gib,
        interval_ms=Interval(
            target=sampler.interval_ms if sampler else last.get("interval_ms"),
            **(sampler.interval_stats() if sampler else {}),
        ),
        cost_ms=Cost.model_validate(sampler.cost_stats()) if sampler else None,
        stages=list(dict.fromkeys([*stages, *marked_stages(logs)])),
        no_telemetry=no_telemetry,
        telemetry=telemetry,
        cards=list(figures(logs).values()),
        series_files=[f for t in telemetry for f in t.files],
    )


async def vram(ctx: StageContext) -> StageResult:
    """Stop the sampler and judge what the rebuild derives from every attempt's samples; the
    draft holds what the sampler alone knows (its own timings, why there was no telemetry)."""
    sampler = ctx.sampler if isinstance(ctx.sampler, Sampler) else None
    if sampler is not None:
        sampler.stop()  # idempotent: nothing appends any more, and its log is sealed
    record = build_record([], sampler, [], ctx.thresholds.vram_reserve_gib)
    return finish(ctx, ctx.judge(record), record)
