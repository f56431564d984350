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

from qualify.evidence.kept import AttemptView, NotKept
from qualify.evidence.store import RESULT
from qualify.records import StageResult
from qualify.vram.record import Cost, Hardware, Interval, Record
from qualify.vram.series import TELEMETRY, Log, parse_log
from qualify.vram.stage import build_record, ran

_ATTEMPT = re.compile(r"^(?P<stage>[^/]+)/attempt-(?P<n>\d{3})/(?P<name>[^/]+)$")
_SAMPLES = re.compile(r"^samples\.\d{3}\.jsonl$")


def _attempts(view: AttemptView) -> dict[str, dict[int, list[str]]]:
    """Every signed attempt of the run: stage -> attempt number -> its file names."""
    out: dict[str, dict[int, list[str]]] = {}
    for rel in view.files:
        if m := _ATTEMPT.match(rel):
            out.setdefault(m["stage"], {}).setdefault(int(m["n"]), []).append(m["name"])
    return out


def _read(view: AttemptView, rel: str) -> bytes:
    if rel not in view.files:
        raise NotKept(f"{rel}: not a signed file of the run")
    return (view.run / rel).read_bytes()


def _logs(view: AttemptView, attempts: dict[int, list[str]]) -> list[Log]:
    """The telemetry attempts the vram attempt read: those whose sampler had started (its
    header's `t0_utc`) by the time the vram attempt started, parsed from their signed files."""
    logs = []
    for n, names in sorted(attempts.items()):
        d = f"{TELEMETRY}/attempt-{n:03d}"
        if "header.json" not in names:
            continue  # the stage skips an attempt with no header too
        samples = [_read(view, f"{d}/{f}") for f in sorted(names) if _SAMPLES.match(f)]
        summary = _read(view, f"{d}/summary.json") if "summary.json" in names else None
        log = parse_log(n, view.run / d, _read(view, f"{d}/header.json"), samples, summary)
        if log is None:
            continue
        t0 = log.header.get("t0_utc")
        if isinstance(t0, str) and t0 > view.result.started_at:
            continue  # a sampler of a later process (a `--resume` after this attempt)
        logs.append(log)
    return logs


def _listed(view: AttemptView) -> list[str]:
    """The run's stages as its signed `run.json` lists them (`stage._listed`)."""
    try:
        info = json.loads(_read(view, "run.json"))
        return [str(s) for s in info["stages"]]
    except (NotKept, ValueError, KeyError, TypeError):
        if view.candidate is None:
            raise NotKept("no signed run.json and no signed candidate copy") from None
        return list(view.candidate.stages.run)


def _ran(view: AttemptView, attempts: dict[str, dict[int, list[str]]]) -> list[str]:
    """`stage.ran` over the signed attempts that had started by the vram attempt."""

    def results(name: str) -> Iterator[StageResult | None]:
        for n, names in sorted(attempts.get(name, {}).items()):
            res = None
            if RESULT in names:
                with contextlib.suppress(ValueError):
                    rel = f"{name}/attempt-{n:03d}/{RESULT}"
                    res = StageResult.model_validate_json(_read(view, rel))
            if res is None or res.started_at <= view.result.started_at:
                yield res

    return ran(_listed(view), results)


def rebuild(view: AttemptView) -> Record:
    """The vram stage's record as the kept samples give it (see the module docstring)."""
    sealed = view.sealed
    attempts = _attempts(view)
    logs = _logs(view, attempts.get(TELEMETRY, {}))
    reserve = sealed.get("reserve_gib")
    if not isinstance(reserve, int | float):
        raise NotKept("its record names no reserve")
    record = build_record(logs, None, _ran(view, attempts), float(reserve))
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
