"""The capacity stage's judges, declared in `gates/capacity/*.yaml`, reading the stage's data.

`data` is what `qualify.capacity.stage` stores: `matrix` (one row per lane and cell), `kinds`
(per-kind decode rows), `expected` (the candidate's declared ranges), `degenerate` (listed
answers), `engine` (what the engine reports), `incumbent` (what the alias points at) and
`comparison` (candidate against incumbent per cell and metric).

- `capacity-expected-range`: one verdict per declared range; a covered cell outside it fails;
  no range declared at all is `inconclusive` ("no range"), never a pass;
- `capacity-unranged`: the measured cells no range covers, `inconclusive` when there are any;
- `capacity-requests`: no timed request failed or was cut;
- `capacity-measured`: every cell that was run has a counted run, with the engine idle around;
- `capacity-fidelity`: per cell, the client's completion tokens agree with the server's own
  generated-token counter over the same window, within `fidelity_decode_tolerance`;
- `capacity-incumbent`: per cell, a regression against the incumbent beyond
  `ab_max_regression_pct`, with the whole interval beyond it, fails; no incumbent is `skipped`;
- `capacity-degenerate`: degenerate answers, listed (left out of every speed figure);
- `capacity-engine`: the engine reported its KV capacity (`inconclusive` when it did not);
- `capacity-answers`: per load cell, every answer judged and none broken;
- `capacity-goodput`: the knee ("serves R req/s at goodput G under SLO S"), and the house's
  minimum rate when it sets one;
- `capacity-harness`: per open-loop cell, the client kept to its schedule (else `error`);
- `capacity-soak`: no hung engine, requests completed, drift and error counters within bounds;
- `capacity-energy`: J per output token per lane and cell, `inconclusive` when unmeasured.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from qualify.capacity.settings import ExpectedRange
from qualify.gates.files import Params
from qualify.gates.registry import Judged, judge
from qualify.gates.thresholds import Thresholds
from qualify.records import Verdict, worst

STAGE = "capacity"


class NoParams(Params):
    pass


class DegenerateParams(Params):
    max_answers: Annotated[int, Field(ge=0)] = Field(
        0, description="degenerate answers tolerated over the whole stage"
    )


def _cells(data: dict[str, Any], lane: str = "candidate") -> list[dict[str, Any]]:
    return [r for r in data.get("matrix", []) if r.get("lane", "candidate") == lane]


def _fmt(v: Any) -> str:
    return f"{v:.4g}" if isinstance(v, int | float) else "none"


@judge(STAGE, "capacity-expected-range", NoParams)
def expected_range(data: dict[str, Any], params: NoParams, thresholds: Thresholds) -> list[Judged]:
    """Per declared range: every cell it covers lies within it; a cell without the figure, or a
    range that covers no measured cell, is inconclusive. No range at all: inconclusive."""
    ranges = [ExpectedRange.model_validate(r) for r in data.get("expected", [])]
    cells = _cells(data)
    if not ranges:
        keys = [c["cell"] for c in cells]
        why = f"no range: the candidate declares no expected range ({len(keys)} cells unjudged)"
        return [Judged(Verdict.INCONCLUSIVE, [why], {"no_range": keys})]
    out = []
    for rng in ranges:
        covered = [c for c in cells if rng.covers(int(c["length"]), int(c["concurrency"]))]
        part = rng.cell if rng.metric == "aggregate_output_tok_s" else f"{rng.cell}-{rng.metric}"
        metrics: dict[str, Any] = {"range": rng.model_dump(), "values": {}}
        if not covered:
            why = f"range {rng.shown()} covers no measured cell"
            out.append(Judged(Verdict.INCONCLUSIVE, [why], metrics, part))
            continue
        verdicts, reasons = [], []
        for c in covered:
            v = c.get(rng.metric)
            metrics["values"][c["cell"]] = v
            if not isinstance(v, int | float):
                verdicts.append(Verdict.INCONCLUSIVE)
                reasons.append(f"{c['cell']}: no {rng.metric} measured")
            elif (rng.min is not None and v < rng.min) or (rng.max is not None and v > rng.max):
                verdicts.append(Verdict.FAIL)
                reasons.append(f"{c['cell']}: {rng.metric} {v:.4g} is outside {rng.shown()}")
            else:
                verdicts.append(Verdict.PASS)
        out.append(Judged(worst(verdicts), reasons, metrics, part))
    return out


@judge(STAGE, "capacity-unranged", NoParams)
def unranged(data: dict[str, Any], params: NoParams, thresholds: Thresholds) -> list[Judged]:
    """Inconclusive while a measured cell has no expected range: reported as "no range"."""
    ranges = [ExpectedRange.model_validate(r) for r in data.get("expected", [])]
    cells = _cells(data)
    if not cells:
        return []
    bare = [
        c["cell"]
        for c in cells
        if not any(r.covers(int(c["length"]), int(c["concurrency"])) for r in ranges)
    ]
    if bare:
        why = f"no range for {len(bare)} of {len(cells)} cells: {', '.join(bare)}"
        return [Judged(Verdict.INCONCLUSIVE, [why], {"no_range": bare})]
    return [Judged(Verdict.PASS, [], {"no_range": []})]


@judge(STAGE, "capacity-requests", NoParams)
def requests(data: dict[str, Any], params: NoParams, thresholds: Thresholds) -> list[Judged]:
    """Fail when a timed request of the candidate failed or was cut (matrix or per-kind)."""
    rows = _cells(data) + [
        {**k, "cell": f"{k['kind']}@{k['depth']}"} for k in data.get("kinds", [])
    ]
    if not rows:
        return []
    bad = [
        f"{r['cell']}: {r['failed']} failed and {r['cut']} cut of {r['requests']} requests"
        for r in rows
        if r.get("failed") or r.get("cut")
    ]
    total = sum(int(r.get("requests") or 0) for r in rows)
    return [Judged(Verdict.FAIL if bad else Verdict.PASS, bad, {"requests": total})]


@judge(STAGE, "capacity-measured", NoParams)
def measured(data: dict[str, Any], params: NoParams, thresholds: Thresholds) -> list[Judged]:
    """Every cell that ran has at least one counted run (idle before and after, nothing failed,
    no degenerate answer); an engine whose idle state is unknown is inconclusive."""
    rows = _cells(data) + [
        {**k, "cell": f"{k['kind']}@{k['depth']}"} for k in data.get("kinds", [])
    ]
    if not rows:
        return []
    unknown = [r["cell"] for r in rows if r.get("idle_unknown")]
    empty = [
        f"{r['cell']}: no counted run ({'; '.join(e['why'] for e in r['excluded_runs'])})"
        for r in rows
        if not r.get("counted_runs")
    ]
    metrics = {
        "cells": len(rows),
        "excluded_runs": sum(len(r.get("excluded_runs", [])) for r in rows),
    }
    if empty:
        return [Judged(Verdict.ERROR, empty, metrics)]
    if unknown:
        why = f"idle unknown (no running/waiting gauges) around {', '.join(unknown)}"
        return [Judged(Verdict.INCONCLUSIVE, [why], metrics)]
    return [Judged(Verdict.PASS, [], metrics)]


@judge(STAGE, "capacity-fidelity", NoParams)
def fidelity(data: dict[str, Any], params: NoParams, thresholds: Thresholds) -> list[Judged]:
    """Per cell: client completion tokens over the server's generated-token delta in the same
    window is within the policy's fidelity tolerance of 1; no server counter: inconclusive."""
    out = []
    tol = thresholds.fidelity_decode_tolerance
    for c in _cells(data):
        if not c.get("counted_runs"):
            continue
        ratio = c.get("server_ratio")
        m = {"server_ratio": ratio, "tolerance": tol}
        if not isinstance(ratio, int | float):
            why = "the server reports no generated-token counter to check the aggregate against"
            out.append(Judged(Verdict.INCONCLUSIVE, [why], m, c["cell"]))
        elif abs(ratio - 1.0) > tol:
            why = (
                f"client completion tokens are {ratio:.4f} × the server's count over the same "
                f"window (expected within {tol:.0%})"
            )
            out.append(Judged(Verdict.FAIL, [why], m, c["cell"]))
        else:
            out.append(Judged(Verdict.PASS, [], m, c["cell"]))
    return out


def _regression(row: dict[str, Any], margin: float) -> tuple[Verdict, str | None]:
    d, ci = row.get("delta_pct"), row.get("delta_pct_ci95")
    name = f"{row['metric']} {_fmt(row['candidate'])} vs incumbent {_fmt(row['incumbent'])}"
    if not isinstance(d, int | float):
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
def incumbent(data: dict[str, Any], params: NoParams, thresholds: Thresholds) -> list[Judged]:
    """Per cell: fail when the candidate is slower than the incumbent (aggregate or per-stream
    decode) by more than `ab_max_regression_pct` with the whole interval beyond it. No incumbent
    is `skipped` (the comparison was switched off, or the alias already names this candidate),
    except for a first qualification (the alias points at nothing: nothing to regress against,
    a pass that says so); an incumbent that could not be measured is `inconclusive`."""
    info = data.get("incumbent") or {}
    status = info.get("status", "none")
    if status == "first":
        return [Judged(Verdict.PASS, [f"first qualification: {info.get('why', '')}"])]
    if status in ("none", "same"):
        return [Judged(Verdict.SKIPPED, [f"no incumbent: {info.get('why', 'not looked for')}"])]
    if status != "measured":
        return [Judged(Verdict.INCONCLUSIVE, [f"incumbent {status}: {info.get('why', '')}"])]
    margin = thresholds.ab_max_regression_pct
    by_cell: dict[str, list[dict[str, Any]]] = {}
    for row in data.get("comparison", []):
        by_cell.setdefault(row["cell"], []).append(row)
    out = []
    for cell, rows in by_cell.items():
        judged = [_regression(r, margin) for r in rows]
        reasons = [why for _, why in judged if why]
        metrics = {"margin_pct": margin, "rows": rows}
        out.append(Judged(worst([v for v, _ in judged]), reasons, metrics, cell))
    return out


@judge(STAGE, "capacity-degenerate", DegenerateParams)
def degenerate_answers(
    data: dict[str, Any], params: DegenerateParams, thresholds: Thresholds
) -> list[Judged]:
    """Degenerate answers are listed and left out of every speed; more than allowed fails."""
    found = data.get("degenerate", [])
    reasons = [
        f"{d['where']} stream {d['stream']}: {d['reason']}" for d in found[: params.max_answers + 5]
    ]
    verdict = Verdict.FAIL if len(found) > params.max_answers else Verdict.PASS
    return [Judged(verdict, reasons if verdict is Verdict.FAIL else [], {"answers": len(found)})]


@judge(STAGE, "capacity-engine", NoParams)
def engine(data: dict[str, Any], params: NoParams, thresholds: Thresholds) -> list[Judged]:
    """The engine reported its KV capacity or its concurrency at the full context."""
    eng = data.get("engine") or {}
    m = {k: eng.get(k) for k in ("kv_tokens", "max_concurrency_at_full_context", "slots")}
    if eng.get("reported"):
        return [Judged(Verdict.PASS, [], m)]
    why = f"the {eng.get('engine', 'engine')} server reported no KV capacity"
    return [
        Judged(Verdict.INCONCLUSIVE, [why + (f" ({eng['note']})" if eng.get("note") else "")], m)
    ]


def _load(data: dict[str, Any]) -> dict[str, Any]:
    return data.get("load") or {}


def _ci(ci: Any) -> str:
    return f"{ci[0]:.0%}–{ci[1]:.0%}" if isinstance(ci, list | tuple) and len(ci) == 2 else "none"


@judge(STAGE, "capacity-answers", NoParams)
def answers(data: dict[str, Any], params: NoParams, thresholds: Thresholds) -> list[Judged]:
    """Per load cell (matrix, per-kind, open-loop, burst, soak): every answered request was
    judged and none broke (degenerate, garble, JSON, tool calls, truncation); a cell whose
    answers break fails however fast it was. Nothing judged at all is inconclusive."""
    cells = (data.get("answers") or {}).get("cells", [])
    out = []
    for c in cells:
        if c.get("lane", "candidate") != "candidate":
            continue
        bad = c.get("broken") or []
        m = {"judged": c.get("judged", 0), "broken": len(bad), "kind": c.get("kind")}
        if bad:
            reasons = [
                f"stream {b['stream']}: {'; '.join(b['problems'])}"[:300] for b in bad[:5]
            ] + ([f"and {len(bad) - 5} more broken answers"] if len(bad) > 5 else [])
            out.append(Judged(Verdict.FAIL, reasons, m, c["where"]))
        elif not c.get("judged"):
            out.append(
                Judged(Verdict.INCONCLUSIVE, ["no answered request to judge"], m, c["where"])
            )
        else:
            out.append(Judged(Verdict.PASS, [], m, c["where"]))
    if not out:
        return [Judged(Verdict.INCONCLUSIVE, ["no load cell's answers were judged"])]
    return out


@judge(STAGE, "capacity-goodput", NoParams)
def goodput_knee(data: dict[str, Any], params: NoParams, thresholds: Thresholds) -> list[Judged]:
    """The knee: the highest Poisson rate whose goodput (share of requests meeting every SLO)
    stays at or above the floor. Fails when no rate meets it, or when the house requires a
    minimum rate (`capacity_min_goodput_rps`) and a saturated search found less; a search that
    stopped at a bound before saturating is a lower bound (inconclusive below the minimum); a
    harness error is `error`; no load run is `skipped`."""
    load = _load(data)
    knee = load.get("knee")
    need = thresholds.capacity_min_goodput_rps
    if not knee:
        why = load.get("error") or "the open-loop load was not run (stages.capacity.load)"
        return [Judged(Verdict.SKIPPED, [why])]
    m = {
        k: knee.get(k)
        for k in ("rate_rps", "goodput", "goodput_ci95", "goodput_rps", "lower_bound", "stopped")
    }
    m.update(statement=knee.get("statement"), slo=knee.get("slo"), min_rps=need)
    if knee.get("harness_error"):
        return [Judged(Verdict.ERROR, [f"harness error, no figure: {knee['stopped']}"], m)]
    rate = knee.get("rate_rps")
    if not isinstance(rate, int | float):
        return [Judged(Verdict.FAIL, [knee.get("statement") or "no rate met the floor"], m)]
    if need is not None and rate < need:
        why = f"{knee['statement']}: below the house's minimum {need:g} req/s"
        if knee.get("lower_bound"):
            why += f" (the search stopped at a bound, not at saturation: {knee['stopped']})"
            return [Judged(Verdict.INCONCLUSIVE, [why], m)]
        return [Judged(Verdict.FAIL, [why], m)]
    return [Judged(Verdict.PASS, [knee["statement"]], m)]


@judge(STAGE, "capacity-harness", NoParams)
def harness(data: dict[str, Any], params: NoParams, thresholds: Thresholds) -> list[Judged]:
    """Per open-loop cell and the soak: the client kept to its schedule and read the server in
    time (p99 send lag and loop oversleep within `client_max_lag_ms`); when it did not, the cell
    is a harness `error`: the load the server saw was not the load planned."""
    load = _load(data)
    rows = list(load.get("cells", [])) + (
        [{**load["soak"], "cell": "soak"}] if load.get("soak") else []
    )
    out = []
    for c in rows:
        lag = c.get("lag") or {}
        m = {**lag, "bound_ms": thresholds.client_max_lag_ms}
        if c.get("harness_error"):
            out.append(
                Judged(Verdict.ERROR, [f"harness error: {c['harness_error']}"], m, c["cell"])
            )
        else:
            out.append(Judged(Verdict.PASS, [], m, c["cell"]))
    return out


@judge(STAGE, "capacity-soak", NoParams)
def soak_gate(data: dict[str, Any], params: NoParams, thresholds: Thresholds) -> list[Judged]:
    """The soak: the engine kept making progress (a hung engine, progress stopped with requests
    in flight while /health may still answer, fails named as such), requests completed, and
    TTFT drift, memory growth and engine error counters stayed within the house's bounds."""
    s = _load(data).get("soak")
    if not s:
        return [Judged(Verdict.SKIPPED, ["the soak was not run (stages.capacity.soak)"])]
    drift = (s.get("ttft_drift") or {}).get("drift_pct")
    growth = (s.get("memory") or {}).get("growth_mib")
    m = {
        "rate_rps": s.get("rate_rps"),
        "duration_s": s.get("duration_s"),
        "completed": s.get("completed"),
        "planned": s.get("planned"),
        "ttft_drift_pct": drift,
        "memory_growth_mib": growth,
        "memory_source": (s.get("memory") or {}).get("source"),
        "error_counters": s.get("error_counters"),
        "detected_after_s": s.get("detected_after_s"),
        "detection_bound_s": s.get("detection_bound_s"),
        "goodput": s.get("goodput"),
    }
    if s.get("hung"):
        return [Judged(Verdict.FAIL, [s["hung"]], m)]
    reasons = []
    if not s.get("completed"):
        reasons.append(f"no request of {s.get('planned')} completed during the soak")
    if s.get("unfinished"):
        reasons.append(f"{s['unfinished']} requests did not finish within the soak's drain")
    if isinstance(drift, int | float) and drift > thresholds.soak_max_ttft_drift_pct:
        d = s["ttft_drift"]
        reasons.append(
            f"TTFT drifted {drift:+.0f}% (median {d['first_p50_s']:.3g} s in the first third, "
            f"{d['last_p50_s']:.3g} s in the last; bound {thresholds.soak_max_ttft_drift_pct:g}%)"
        )
    if isinstance(growth, int | float) and growth > thresholds.soak_max_memory_growth_mib:
        reasons.append(
            f"{m['memory_source']} grew {growth:.0f} MiB over the soak "
            f"(bound {thresholds.soak_max_memory_growth_mib:g} MiB)"
        )
    for name, delta in (s.get("error_counters") or {}).items():
        reasons.append(f"engine error counter {name} rose by {delta:g}")
    return [Judged(Verdict.FAIL if reasons else Verdict.PASS, reasons, m)]


@judge(STAGE, "capacity-energy", NoParams)
def energy(data: dict[str, Any], params: NoParams, thresholds: Thresholds) -> list[Judged]:
    """J per output token per lane and cell, from the GPU sampler's power integrated over each
    timed window; inconclusive ("unmeasured") without GPU power telemetry."""
    rows = [(r["cell"], r["lane"], r.get("energy") or {}) for r in data.get("matrix", [])]
    load = _load(data)
    for c in load.get("cells", []) + (
        [{**load["soak"], "cell": "soak"}] if load.get("soak") else []
    ):
        rows.append((c["cell"], load.get("lane", "candidate"), c.get("energy") or {}))
    out = []
    for cell, lane, e in rows:
        part = cell if lane == "candidate" else f"{lane}-{cell}"
        j = e.get("j_per_output_token")
        m = {"j_per_output_token": j, "joules": e.get("joules"), "lane": lane}
        if isinstance(j, int | float):
            out.append(Judged(Verdict.PASS, [f"{j:.4g} J per output token"], m, part))
        else:
            why = e.get("why") or "unmeasured: no GPU telemetry"
            out.append(Judged(Verdict.INCONCLUSIVE, [why], m, part))
    return out
