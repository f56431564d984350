"""The capacity stage's judges, declared in `gates/capacity/*.yaml`, reading the stage's typed
record (`qualify.capacity.record.Record`); each judge's docstring says what it holds."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from qualify.capacity.loads import Drift, Soak
from qualify.capacity.parts import Energy
from qualify.capacity.record import Comparison, KindRow, MatrixRow, Record
from qualify.gates.files import Params
from qualify.gates.registry import Judged, judge
from qualify.gates.thresholds import Thresholds
from qualify.httpclient.degenerate import degenerate_verdict
from qualify.records import Verdict, worst

STAGE = "capacity"


class NoParams(Params):
    pass


class DegenerateParams(Params):
    max_answers: Annotated[int, Field(ge=0)] = Field(
        0, description="degenerate answers tolerated over the whole stage"
    )


def _fmt(v: object) -> str:
    return f"{v:.4g}" if isinstance(v, int | float) else "none"


def _rows(data: Record) -> list[MatrixRow | KindRow]:
    """The candidate's matrix cells and per-kind rows."""
    return [*data.cells(), *data.kinds]


@judge(STAGE, "capacity-expected-range", NoParams)
def expected_range(data: Record, params: NoParams, thresholds: Thresholds) -> list[Judged]:
    """Per declared range: every cell it covers lies within it; a cell without the figure, or a
    range that covers no measured cell, is inconclusive. No range at all: inconclusive."""
    cells = data.cells()
    if not data.expected:
        keys = [c.cell for c in cells]
        why = f"no range: the candidate declares no expected range ({len(keys)} cells unjudged)"
        return [Judged(Verdict.INCONCLUSIVE, [why], {"no_range": keys})]
    out = []
    for rng in data.expected:
        covered = [c for c in cells if rng.covers(c.length, c.concurrency)]
        part = rng.cell if rng.metric == "aggregate_output_tok_s" else f"{rng.cell}-{rng.metric}"
        values: dict[str, float | None] = {}
        metrics: dict[str, object] = {"range": rng.model_dump(), "values": values}
        if not covered:
            why = f"range {rng.shown()} covers no measured cell"
            out.append(Judged(Verdict.INCONCLUSIVE, [why], metrics, part))
            continue
        verdicts, reasons = [], []
        for c in covered:
            v: float | None = getattr(c, rng.metric)
            values[c.cell] = v
            if v is None:
                verdicts.append(Verdict.INCONCLUSIVE)
                reasons.append(f"{c.cell}: no {rng.metric} measured")
            elif (rng.min is not None and v < rng.min) or (rng.max is not None and v > rng.max):
                verdicts.append(Verdict.FAIL)
                reasons.append(f"{c.cell}: {rng.metric} {v:.4g} is outside {rng.shown()}")
            else:
                verdicts.append(Verdict.PASS)
        out.append(Judged(worst(verdicts), reasons, metrics, part))
    return out


@judge(STAGE, "capacity-unranged", NoParams)
def unranged(data: Record, params: NoParams, thresholds: Thresholds) -> list[Judged]:
    """Inconclusive while a measured cell has no expected range: reported as "no range"."""
    cells = data.cells()
    if not cells:
        return []
    bare = [
        c.cell for c in cells if not any(r.covers(c.length, c.concurrency) for r in data.expected)
    ]
    if bare:
        why = f"no range for {len(bare)} of {len(cells)} cells: {', '.join(bare)}"
        return [Judged(Verdict.INCONCLUSIVE, [why], {"no_range": bare})]
    return [Judged(Verdict.PASS, [], {"no_range": []})]


@judge(STAGE, "capacity-requests", NoParams)
def requests(data: Record, params: NoParams, thresholds: Thresholds) -> list[Judged]:
    """Fail when a timed request of the candidate failed or was cut (matrix or per-kind)."""
    rows = _rows(data)
    if not rows:
        return []
    bad = [
        f"{r.cell}: {r.failed} failed and {r.cut} cut of {r.requests} requests"
        for r in rows
        if r.failed or r.cut
    ]
    total = sum(r.requests for r in rows)
    return [Judged(Verdict.FAIL if bad else Verdict.PASS, bad, {"requests": total})]


@judge(STAGE, "capacity-measured", NoParams)
def measured(data: Record, params: NoParams, thresholds: Thresholds) -> list[Judged]:
    """Every cell that ran has at least one counted run (idle before and after, nothing failed,
    no degenerate answer); an engine whose idle state is unknown is inconclusive."""
    rows = _rows(data)
    if not rows:
        return []
    unknown = [r.cell for r in rows if r.idle_unknown]
    empty = [
        f"{r.cell}: no counted run ({'; '.join(e.why for e in r.excluded_runs)})"
        for r in rows
        if not r.counted_runs
    ]
    metrics = {"cells": len(rows), "excluded_runs": sum(len(r.excluded_runs) for r in rows)}
    if empty:
        return [Judged(Verdict.ERROR, empty, metrics)]
    if unknown:
        why = f"idle unknown (no running/waiting gauges) around {', '.join(unknown)}"
        return [Judged(Verdict.INCONCLUSIVE, [why], metrics)]
    return [Judged(Verdict.PASS, [], metrics)]


@judge(STAGE, "capacity-fidelity", NoParams)
def fidelity(data: Record, params: NoParams, thresholds: Thresholds) -> list[Judged]:
    """Per cell: client completion tokens over the server's generated-token delta in the same
    window, and where the server keeps latency histograms (vLLM) the client's decode tok/s over
    the server's, are within the policy's fidelity tolerance of 1; no server counter:
    inconclusive."""
    out = []
    tol = thresholds.fidelity_decode_tolerance
    for c in data.cells():
        if not c.counted_runs:
            continue
        ratio, decode = c.server_ratio, c.server_decode_ratio
        m = {"server_ratio": ratio, "server_decode_ratio": decode, "tolerance": tol}
        reasons = [
            f"client {what} {x:.4f} × the server's {theirs} over the same window (expected "
            f"within {tol:.0%})"
            for x, what, theirs in (
                (ratio, "completion tokens are", "count"),
                (decode, "decode tok/s is", "histograms"),
            )
            if x is not None and abs(x - 1.0) > tol
        ]
        if reasons:
            out.append(Judged(Verdict.FAIL, reasons, m, c.cell))
        elif ratio is None:
            why = "the server reports no generated-token counter to check the aggregate against"
            out.append(Judged(Verdict.INCONCLUSIVE, [why], m, c.cell))
        else:
            out.append(Judged(Verdict.PASS, [], m, c.cell))
    return out


def _regression(row: Comparison, margin: float) -> tuple[Verdict, str | None]:
    d, ci = row.delta_pct, row.delta_pct_ci95
    name = f"{row.metric} {_fmt(row.candidate)} vs incumbent {_fmt(row.incumbent)}"
    if d is None:
        return Verdict.INCONCLUSIVE, f"{name}: no delta (a lane measured nothing)"
    if d >= -margin:
        return Verdict.PASS, None
    if ci is None:
        return Verdict.INCONCLUSIVE, (
            f"{name}: {d:+.1f}% is beyond the −{margin:g}% margin, but one run per lane gives "
            "no interval"
        )
    if ci[1] < -margin:
        return Verdict.FAIL, (
            f"{name}: {d:+.1f}% (95% interval {ci[0]:+.1f}% to {ci[1]:+.1f}%) regresses beyond "
            f"the −{margin:g}% margin"
        )
    return Verdict.PASS, None


@judge(STAGE, "capacity-incumbent", NoParams)
def incumbent(data: Record, params: NoParams, thresholds: Thresholds) -> list[Judged]:
    """Per cell: fail when the candidate is slower than the incumbent (aggregate or per-stream
    decode) by more than `ab_max_regression_pct` with the whole interval beyond it. No incumbent
    is `skipped` (the comparison was switched off, or the alias already names this candidate),
    except for a first qualification (the alias points at nothing: nothing to regress against,
    a pass that says so); an incumbent that could not be measured is `inconclusive`."""
    info = data.incumbent
    if info.status == "first":
        return [Judged(Verdict.PASS, [f"first qualification: {info.why}"])]
    if info.status in ("none", "same"):
        return [Judged(Verdict.SKIPPED, [f"no incumbent: {info.why or 'not looked for'}"])]
    if info.status != "measured":
        return [Judged(Verdict.INCONCLUSIVE, [f"incumbent {info.status}: {info.why}"])]
    margin = thresholds.ab_max_regression_pct
    by_cell: dict[str, list[Comparison]] = {}
    for row in data.comparison:
        by_cell.setdefault(row.cell, []).append(row)
    out = []
    for cell, rows in by_cell.items():
        judged = [_regression(r, margin) for r in rows]
        reasons = [why for _, why in judged if why]
        metrics = {"margin_pct": margin, "rows": [r.model_dump(mode="json") for r in rows]}
        out.append(Judged(worst([v for v, _ in judged]), reasons, metrics, cell))
    return out


@judge(STAGE, "capacity-degenerate", DegenerateParams)
def degenerate_answers(
    data: Record, params: DegenerateParams, thresholds: Thresholds
) -> list[Judged]:
    """Degenerate answers are listed and left out of every speed; more than allowed fails, and
    nothing counted is inconclusive (`qualify.httpclient.degenerate.degenerate_verdict`)."""
    found = data.degenerate
    rows: list[MatrixRow | KindRow] = [*data.matrix, *data.kinds]  # every lane's answers
    runs = [run for r in rows for run in r.run_records]
    counted = sum(1 for run in runs for st in run.streams if not st.failed and not st.cut)
    lines = [f"{d.where} stream {d.stream}: {d.reason}" for d in found]
    verdict, reasons = degenerate_verdict(lines, counted, params.max_answers)
    return [Judged(verdict, reasons, {"answers": len(found), "streams": counted})]


@judge(STAGE, "capacity-engine", NoParams)
def engine(data: Record, params: NoParams, thresholds: Thresholds) -> list[Judged]:
    """The engine reported its KV capacity or its concurrency at the full context."""
    eng = data.engine
    m = {k: getattr(eng, k) for k in ("kv_tokens", "max_concurrency_at_full_context", "slots")}
    if eng.reported:
        return [Judged(Verdict.PASS, [], m)]
    why = f"the {eng.engine or 'engine'} server reported no KV capacity"
    return [Judged(Verdict.INCONCLUSIVE, [why + (f" ({eng.note})" if eng.note else "")], m)]


@judge(STAGE, "capacity-answers", NoParams)
def answers(data: Record, params: NoParams, thresholds: Thresholds) -> list[Judged]:
    """Per load cell (matrix, per-kind, open-loop, burst, soak): every answered request was
    judged and none broke (degenerate, garble, JSON, tool calls, truncation); a cell whose
    answers break fails however fast it was. Nothing judged at all is inconclusive."""
    out = []
    for c in data.answers.cells:
        if c.lane != "candidate":
            continue
        bad = c.broken
        m = {"judged": c.judged, "broken": len(bad), "kind": c.kind}
        if bad:
            reasons = [f"stream {b.stream}: {'; '.join(b.problems)}"[:300] for b in bad[:5]] + (
                [f"and {len(bad) - 5} more broken answers"] if len(bad) > 5 else []
            )
            out.append(Judged(Verdict.FAIL, reasons, m, c.where))
        elif not c.judged:
            out.append(Judged(Verdict.INCONCLUSIVE, ["no answered request to judge"], m, c.where))
        else:
            out.append(Judged(Verdict.PASS, [], m, c.where))
    if not out:
        return [Judged(Verdict.INCONCLUSIVE, ["no load cell's answers were judged"])]
    return out


@judge(STAGE, "capacity-goodput", NoParams)
def goodput_knee(data: Record, params: NoParams, thresholds: Thresholds) -> list[Judged]:
    """The knee: the highest Poisson rate whose goodput (share of requests meeting every SLO)
    stays at or above the floor. Fails when no rate meets it, or when the house requires a
    minimum rate (`capacity_min_goodput_rps`) and a saturated search found less; a search that
    stopped at a bound before saturating is a lower bound (inconclusive below the minimum); a
    harness error is `error`; no load run is `skipped`."""
    knee = data.load.knee
    need = thresholds.capacity_min_goodput_rps
    if knee is None:
        why = data.load.error or "the open-loop load was not run (stages.capacity.load)"
        return [Judged(Verdict.SKIPPED, [why])]
    shown = ("rate_rps", "goodput", "goodput_ci95", "goodput_rps", "lower_bound", "stopped")
    m = {k: getattr(knee, k) for k in (*shown, "statement", "slo")} | {"min_rps": need}
    if knee.harness_error:
        return [Judged(Verdict.ERROR, [f"harness error, no figure: {knee.stopped}"], m)]
    rate = knee.rate_rps
    if rate is None:
        return [Judged(Verdict.FAIL, [knee.statement or "no rate met the floor"], m)]
    if need is not None and rate < need:
        why = f"{knee.statement}: below the house's minimum {need:g} req/s"
        if knee.lower_bound:
            why += f" (the search stopped at a bound, not at saturation: {knee.stopped})"
            return [Judged(Verdict.INCONCLUSIVE, [why], m)]
        return [Judged(Verdict.FAIL, [why], m)]
    return [Judged(Verdict.PASS, [knee.statement], m)]


@judge(STAGE, "capacity-harness", NoParams)
def harness(data: Record, params: NoParams, thresholds: Thresholds) -> list[Judged]:
    """Per open-loop cell and the soak: the client kept to its schedule and read the server in
    time (p99 send lag and loop oversleep within `client_max_lag_ms`); when it did not, the cell
    is a harness `error`: the load the server saw was not the load planned."""
    load = data.load
    rows = [(c.cell, c.lag, c.harness_error) for c in load.cells]
    if load.soak is not None:
        rows.append(("soak", load.soak.lag, load.soak.harness_error))
    out = []
    for cell, lag, error in rows:
        m = {**lag.model_dump(mode="json"), "bound_ms": thresholds.client_max_lag_ms}
        if error:
            out.append(Judged(Verdict.ERROR, [f"harness error: {error}"], m, cell))
        else:
            out.append(Judged(Verdict.PASS, [], m, cell))
    return out


@judge(STAGE, "capacity-soak", NoParams)
def soak_gate(data: Record, params: NoParams, thresholds: Thresholds) -> list[Judged]:
    """The soak: the engine kept making progress (a hung engine, progress stopped with requests
    in flight while /health may still answer, fails named as such), requests completed, and
    TTFT drift, memory growth and engine error counters stayed within the house's bounds; with
    fewer than `soak_min_requests` completed, at a rate from no held knee, or with fewer than
    `soak_min_third_requests` answered in each third (the drift then not judged), inconclusive."""
    s = data.load.soak
    if s is None:
        return [Judged(Verdict.SKIPPED, ["the soak was not run (stages.capacity.soak)"])]
    d, growth = s.ttft_drift, s.memory.growth_mib
    m = {k: getattr(s, k) for k in ("rate_rps", "duration_s", "completed", "planned")}
    m |= {"ttft_drift_pct": d.drift_pct, "memory_growth_mib": growth}
    m["memory_source"] = s.memory.source
    later = ("error_counters", "detected_after_s", "detection_bound_s", "goodput")
    m |= {k: getattr(s, k) for k in later}
    if s.hung:
        return [Judged(Verdict.FAIL, [s.hung], m)]
    reasons = []
    if not s.completed:
        reasons.append(f"no request of {s.planned} completed during the soak")
    if s.unfinished:
        reasons.append(f"{s.unfinished} requests did not finish within the soak's drain")
    thin = _thin_thirds(d, thresholds)
    if not thin and _drifted(d, thresholds):
        rise = f" and at least {thresholds.soak_min_ttft_drift_s:g} s" * bool(
            thresholds.soak_min_ttft_drift_s
        )
        reasons.append(
            f"TTFT drifted {d.drift_pct:+.0f}% (median {_fmt(d.first_p50_s)} s in the first "
            f"third, {_fmt(d.last_p50_s)} s in the last; "
            f"bound {thresholds.soak_max_ttft_drift_pct:g}%{rise})"
        )
    if growth is not None and growth > thresholds.soak_max_memory_growth_mib:
        reasons.append(
            f"{s.memory.source} grew {growth:.0f} MiB over the soak "
            f"(bound {thresholds.soak_max_memory_growth_mib:g} MiB)"
        )
    for name, delta in s.error_counters.items():
        reasons.append(f"engine error counter {name} rose by {delta:g}")
    if reasons:
        return [Judged(Verdict.FAIL, reasons, m)]
    short = _soak_too_short(s, thresholds) if s.rate_from is not None else []
    short += thin
    return [Judged(Verdict.INCONCLUSIVE if short else Verdict.PASS, short, m)]


def _thin_thirds(d: Drift, thresholds: Thresholds) -> list[str]:
    """Why the TTFT drift is not judged: fewer answered requests in each third than the house
    asks (a record made before `per_third` existed: judged as it was)."""
    least = thresholds.soak_min_third_requests
    if d.per_third is None or d.per_third >= least:
        return []
    return [
        f"TTFT drift not judged: {d.answered} answered requests give {d.per_third} per third, "
        f"fewer than {least} (thresholds.soak_min_third_requests)"
    ]


def _soak_too_short(s: Soak, thresholds: Thresholds) -> list[str]:
    """What a soak that failed nothing lacks to show anything: enough completed requests, and a
    rate the knee search showed the server holds (a record of an earlier build: not judged so)."""
    out = []
    if s.completed < thresholds.soak_min_requests:
        out.append(
            f"only {s.completed} requests completed: a soak shows drift, growth and progress "
            f"from at least {thresholds.soak_min_requests} (thresholds.soak_min_requests)"
        )
    if s.rate_from == "lowest-tried":
        out.append(
            f"its rate ({_fmt(s.rate_rps)} req/s) comes from no held knee: no rate met the "
            "goodput floor, so nothing shows the server holds it"
        )
    return out


def _drifted(d: Drift, thresholds: Thresholds) -> bool:
    """TTFT drift beyond the per-cent bound, by at least the house's rise in seconds."""
    if d.drift_pct is None or d.drift_pct <= thresholds.soak_max_ttft_drift_pct:
        return False
    if d.first_p50_s is None or d.last_p50_s is None:
        return True
    return d.last_p50_s - d.first_p50_s >= thresholds.soak_min_ttft_drift_s


@judge(STAGE, "capacity-energy", NoParams)
def energy(data: Record, params: NoParams, thresholds: Thresholds) -> list[Judged]:
    """J per output token per lane and cell, from the GPU sampler's power integrated over each
    timed window; inconclusive ("unmeasured") without GPU power telemetry."""
    rows: list[tuple[str, str, Energy | None]] = [(r.cell, r.lane, r.energy) for r in data.matrix]
    load = data.load
    rows += [(c.cell, load.lane, c.energy) for c in load.cells]
    if load.soak is not None:
        rows.append(("soak", load.lane, load.soak.energy))
    out = []
    for cell, lane, e in rows:
        e = e or Energy()
        part = cell if lane == "candidate" else f"{lane}-{cell}"
        j = e.j_per_output_token
        m = {"j_per_output_token": j, "joules": e.joules, "lane": lane}
        if j is not None:
            out.append(Judged(Verdict.PASS, [f"{j:.4g} J per output token"], m, part))
        else:
            why = e.why or "unmeasured: no GPU telemetry"
            out.append(Judged(Verdict.INCONCLUSIVE, [why], m, part))
    return out
