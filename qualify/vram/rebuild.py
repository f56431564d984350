"""The vram stage's judged data rebuilt from the samples the run kept (`verify` judges it again).

From the signed `telemetry/attempt-NNN/` files only (`qualify.vram.series`), every telemetry
attempt that had started when the vram attempt started (what the stage read), the stage's own
functions (`figures`, `build_record`) compute again every card's figures in every stage, the
stages that ran (from the signed `run.json` and attempts, and the stage marks in the samples)
and each telemetry attempt's account.

Not kept raw, so taken from the sealed record (and said): the sampler's own timing statistics
(the intervals it kept and what a read cost it: its summary holds them, not its samples), the
host's hardware when the sample header does not hold it, and the reserve the record restates
(the gate judges with the signed thresholds' reserve, never the record's).
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator
from dataclasses import replace

from qualify.evidence.kept import AttemptView, NotKept
from qualify.evidence.store import RESULT
from qualify.records import StageResult
from qualify.vram.record import Cost, Hardware, Interval, Record
from qualify.vram.series import TELEMETRY, Log, parse_log
from qualify.vram.stage import build_record, ran

_ATTEMPT = re.compile(r"^(?P<stage>[^/]+)/attempt-(?P<n>\d{3})/[^/]+$")


def _attempts(view: AttemptView, stage: str) -> list[tuple[int, AttemptView]]:
    """The signed attempts of `stage`, in order, each read through its signed files."""
    found = {
        int(m["n"]) for rel in view.files if (m := _ATTEMPT.match(rel)) and m["stage"] == stage
    }
    return [(n, replace(view, attempt=f"{stage}/attempt-{n:03d}")) for n in sorted(found)]


def _logs(view: AttemptView) -> list[Log]:
    """The telemetry attempts the vram attempt read: those whose sampler had started (its
    header's `t0_utc`) by the time the vram attempt started, parsed from their signed files."""
    logs = []
    for n, t in _attempts(view, TELEMETRY):
        log = parse_log(n, view.run / t.attempt, t.read_bytes, t.names())
        t0 = None if log is None else log.header.get("t0_utc")
        # none without a header; none of a later process's sampler (a `--resume` after this)
        if log is not None and not (isinstance(t0, str) and t0 > view.result.started_at):
            logs.append(log)
    return logs


def _ran(view: AttemptView) -> list[str]:
    """`stage.ran` over the signed attempts that had started by the vram attempt, of the run's
    stages as its signed `run.json` lists them."""

    def results(name: str) -> Iterator[StageResult | None]:
        for _, att in _attempts(view, name):
            res = None
            if RESULT in att.names():
                with contextlib.suppress(ValueError):
                    res = StageResult.model_validate_json(att.read_bytes(RESULT))
            if res is None or res.started_at <= view.result.started_at:
                yield res

    with contextlib.suppress(ValueError, KeyError, TypeError):
        if "run.json" in view.files:
            info = json.loads((view.run / "run.json").read_bytes())
            return ran([str(s) for s in info["stages"]], results)
    if view.candidate is None:
        raise NotKept("no signed run.json and no signed candidate copy")
    return ran(list(view.candidate.stages.run), results)


def rebuild(view: AttemptView) -> Record:
    """The vram stage's record as the kept samples give it (see the module docstring)."""
    sealed = view.sealed
    logs = _logs(view)
    reserve = sealed.get("reserve_gib")
    if not isinstance(reserve, int | float):
        raise NotKept("its record names no reserve")
    record = build_record(logs, None, _ran(view), float(reserve))
    view.trust("the sampler's interval and read-cost statistics (its own timings)")
    interval = Interval.model_validate(sealed.get("interval_ms") or {})
    if view.candidate is not None:  # the interval asked for is the candidate's
        interval.target = view.candidate.stages.vram.interval_ms
    cost = sealed.get("cost_ms")
    out: dict[str, object] = {
        "interval_ms": interval,
        "cost_ms": None if cost is None else Cost.model_validate(cost),
    }
    if not logs or not logs[-1].header.get("system"):
        why = (
            "no sample was kept" if not logs else "the sample header of this form does not hold it"
        )
        view.trust(f"the host's hardware ({why})")
        hardware = sealed.get("hardware")
        out["hardware"] = None if hardware is None else Hardware.model_validate(hardware)
    if not logs:
        view.trust("why there was no telemetry (the sampler of the run's process says)")
        out["no_telemetry"] = sealed.get("no_telemetry")
        out["source"], out["power_field"] = sealed.get("source"), sealed.get("power_field")
    return record.model_copy(update=out)
