"""The capacity stage's judges of the soak's speculative acceptance over time, the trace replay
and the agent sessions, declared in `gates/capacity/*.yaml`, reading the stage's typed record."""

from __future__ import annotations

from qualify.capacity.judges import STAGE, NoParams
from qualify.capacity.record import Record
from qualify.capacity.specdrift import NO_SPECULATION
from qualify.gates.registry import Judged, judge
from qualify.gates.thresholds import Thresholds
from qualify.records import Verdict


def _fmt(v: float | None, unit: str = "") -> str:
    return "none" if v is None else f"{v:.3g}{unit}"


def _fell(name: str, first: float | None, last: float | None, bound: float) -> list[str]:
    """Why a figure fell past the bound from the first third to the last, or nothing."""
    if first is None or last is None or not first:
        return []
    drop = (1 - last / first) * 100
    if drop <= bound:
        return []
    return [
        f"{name} fell {drop:.0f}% over the soak ({first:.3g} in the first third, {last:.3g} in "
        f"the last; bound {bound:g}%, thresholds.soak_max_acceptance_drop_pct)"
    ]


@judge(STAGE, "capacity-soak-acceptance", NoParams)
def soak_acceptance(data: Record, params: NoParams, thresholds: Thresholds) -> list[Judged]:
    """Speculative acceptance over the soak's time: the acceptance rate and the mean accepted
    length of the last third of the soak within the house's bound of the first third's, from
    the server's draft counters; "no speculation" is skipped, thin thirds inconclusive."""
    s = data.load.soak
    if s is None:
        return [Judged(Verdict.SKIPPED, ["the soak was not run (stages.capacity.soak)"])]
    a = s.acceptance_drift
    if a is None:
        return [Judged(Verdict.SKIPPED, ["acceptance over the soak not measured"])]
    m = {
        "rate_drift_pct": a.rate_drift_pct,
        "length_drift_pct": a.length_drift_pct,
        "thirds": [t.model_dump(mode="json") for t in a.thirds],
        "bound_pct": thresholds.soak_max_acceptance_drop_pct,
    }
    if a.why is not None or len(a.thirds) != 3:
        verdict = (
            Verdict.SKIPPED if (a.why or "").startswith(NO_SPECULATION) else Verdict.INCONCLUSIVE
        )
        return [Judged(verdict, [a.why or "no acceptance per third"], m)]
    first, last = a.thirds[0], a.thirds[-1]
    least = thresholds.soak_min_third_drafts
    if min(first.drafts, last.drafts) < least:
        why = (
            f"acceptance drift not judged: {first.drafts} drafts in the first third, "
            f"{last.drafts} in the last, fewer than {least} (thresholds.soak_min_third_drafts)"
        )
        return [Judged(Verdict.INCONCLUSIVE, [why], m)]
    bound = thresholds.soak_max_acceptance_drop_pct
    reasons = _fell("the acceptance rate", first.rate, last.rate, bound)
    reasons += _fell("the mean accepted length", first.mean_length, last.mean_length, bound)
    if reasons:
        return [Judged(Verdict.FAIL, reasons, m)]
    said = ", ".join(
        f"{_fmt(t.rate)} ({_fmt(t.mean_length)} tokens per draft, {t.drafts} drafts)"
        for t in a.thirds
    )
    return [Judged(Verdict.PASS, [f"acceptance per third: {said}"], m)]


@judge(STAGE, "capacity-replay", NoParams)
def replay(data: Record, params: NoParams, thresholds: Thresholds) -> list[Judged]:
    """Per replay of the trace (one cell per scale): every request answered, none failed, cut or
    left unfinished, and every answer judged right (degenerate, garble, JSON, tool calls); at
    the trace's own pace or slower, goodput under the SLOs at least the house's floor (faster
    replays show headroom, not judged on it); a lagging client is a harness `error`; no trace
    replayed is `skipped`."""
    cells = data.load.replay
    if not cells:
        return [Judged(Verdict.SKIPPED, ["no trace replayed (stages.capacity.replay.trace)"])]
    slo = data.load.slo or data.slo
    floor = slo.goodput_floor if slo is not None else None
    out = []
    for c in cells:
        m: dict[str, object] = {"scale": c.scale, "requests": c.requests, "floor": floor}
        m |= {"goodput": c.goodput, "goodput_ci95": c.goodput_ci95}
        m |= {"trace": c.trace, "trace_sha256": c.trace_sha256}
        if c.harness_error:
            out.append(Judged(Verdict.ERROR, [f"harness error: {c.harness_error}"], m, c.cell))
            continue
        reasons = [
            f"{n} of {c.requests} replayed requests {what}"
            for n, what in (
                (c.failed, "failed"),
                (c.cut, "were cut"),
                (c.unfinished, "did not finish"),
                (c.broken, "gave a broken answer"),
            )
            if n
        ]
        reasons += [
            f"request {i + 1}: {'; '.join(st.broken)}"
            for i, st in enumerate(c.streams)
            if st.broken
        ]
        short = c.goodput is not None and floor is not None and c.goodput < floor
        if short and c.scale <= 1.0:
            reasons.append(f"goodput {c.goodput:.0%} under the floor {floor:.0%} at {c.scale:g}x")
        said = f"{c.requests} requests at {c.scale:g}x, goodput {_fmt(c.goodput)}"
        out.append(Judged(Verdict.FAIL if reasons else Verdict.PASS, reasons or [said], m, c.cell))
    return out


@judge(STAGE, "capacity-sessions", NoParams)
def sessions(data: Record, params: NoParams, thresholds: Thresholds) -> list[Judged]:
    """The multi-turn agent sessions: every turn answered and judged right (the tool call
    through the server's parser with JSON arguments, the tool result read, the follow-up
    keeping it), and the turns' goodput under the SLOs at least the house's floor; no sessions
    is `skipped`."""
    s = data.load.sessions
    if s is None:
        return [Judged(Verdict.SKIPPED, ["no agent sessions run (stages.capacity.sessions)"])]
    slo = data.load.slo or data.slo
    floor = slo.goodput_floor if slo is not None else None
    m: dict[str, object] = {"sessions": s.count, "turns": len(s.turns), "broken": s.broken}
    m |= {"goodput": s.goodput, "floor": floor, "ttft_p50_s_by_turn": s.ttft_p50_s_by_turn}
    m |= {"prompt_tokens_by_turn": s.prompt_tokens_by_turn}
    m["cached_tokens_by_turn"] = s.cached_tokens_by_turn
    reasons = [
        f"session {t.session + 1} turn {t.turn}: {why}"
        for t in s.turns
        for why in ([t.failed or t.cut] if t.failed or t.cut else t.broken)
    ]
    if s.goodput is not None and floor is not None and s.goodput < floor:
        reasons.append(f"goodput of the turns {s.goodput:.0%} under the floor {floor:.0%}")
    if reasons:
        return [Judged(Verdict.FAIL, reasons, m)]
    ttft = " -> ".join(_fmt(x, " s") for x in s.ttft_p50_s_by_turn)
    said = f"{s.count} sessions, every turn right; TTFT p50 by turn {ttft}"
    return [Judged(Verdict.PASS, [said], m)]
