"""The load's first screen: the knee as offered, sent and completed, and what the soak says of
it (`qualify.capacity.section.figures`), with the few words the capacity section shares."""

from __future__ import annotations

from qualify.capacity.loads import Load
from qualify.present.record import GateOutcome
from qualify.records import Verdict


def _pct(x: float | None) -> str:
    return "no data" if x is None else f"{100 * x:.0f}%"


def interval_pct(ci: list[float] | None) -> str:
    """A [low, high] share as `65%–100%`, or "" when not recorded."""
    if ci is None or len(ci) != 2:
        return ""
    return f"{100 * ci[0]:.0f}%–{100 * ci[1]:.0f}%"


def _verdict(gates: list[GateOutcome], name: str) -> str:
    mine = [g for g in gates if g.stage == "capacity" and g.gate.split("@", 1)[0] == name]
    if not mine:
        return "no gate"
    bad = [g for g in mine if g.verdict is not Verdict.PASS]
    return ", ".join(f"`{g.key}` {g.verdict.value}" for g in bad) if bad else "pass"


def knee_line(ld: Load) -> str:
    """The knee in one clause: the rate offered, sent and completed, its pace, its goodput."""
    knee = ld.knee
    cell = next((c for c in ld.cells if knee is not None and c.cell == knee.cell), None)
    if knee is None or knee.rate_rps is None or cell is None:
        return "no knee held" + (f" ({knee.stopped})" if knee is not None and knee.stopped else "")
    sent = f"{cell.offered_rps:.3g}" if cell.offered_rps is not None else "no data"
    done = f"{cell.achieved_rps:.3g}" if cell.achieved_rps is not None else "no data"
    pace = f"pace {cell.pace:.2f} of it" if cell.pace is not None else "pace no data"
    over = f"; next rate {knee.first_over:.3g} req/s not held" if knee.first_over else ""
    return (
        f"knee {knee.rate_rps:.3g} req/s offered, {sent} sent, {done} completed "
        f"({cell.completed} of {cell.requests} requests, {pace}), goodput "
        f"{_pct(knee.goodput)} (95% interval {interval_pct(knee.goodput_ci95)}){over}"
    )


def soak_line(ld: Load, gates: list[GateOutcome]) -> str:
    """What the soak says of the knee: its verdict at its rate, with the TTFT drift and the
    largest number of requests in flight; a soak below the knee's rate that fails while every
    request completed contradicts the knee."""
    soak, knee = ld.soak, ld.knee
    if soak is None or not soak.model_fields_set:
        return "no soak"
    verdict = _verdict(gates, "soak")
    rate = soak.rate_rps or 0.0
    below = knee is not None and knee.rate_rps is not None and rate <= knee.rate_rps
    share = f", {rate / knee.rate_rps:.2g} of the knee" if below and knee and knee.rate_rps else ""
    head = f"soak at {rate:.3g} req/s{share}: {soak.completed} of {soak.planned} completed"
    drift = soak.ttft_drift
    if drift.first_p50_s is not None and drift.last_p50_s is not None:
        head += f", TTFT p50 {drift.first_p50_s:.2f} s -> {drift.last_p50_s:.2f} s"
    cols = soak.timeline_columns  # in flight at the first sample and the most at any
    i = cols.index("in_flight") if "in_flight" in cols else None
    seen = [int(n) for r in soak.timeline if i is not None and isinstance(n := r[i], int | float)]
    if seen:
        head += f", in flight {seen[0]} -> {max(seen)} at most"
    if verdict == "pass":
        return f"{head} (`capacity/soak` pass)"
    gate = next((g for g in gates if g.stage == "capacity" and g.gate == "soak"), None)
    queued = below and gate is not None and soak_way(gate) == "queue"
    says = ": a queue built below the knee's rate, so the knee overstates it" if queued else ""
    return f"{head} ({verdict}{says})"


def soak_way(g: GateOutcome) -> str:
    """Which way a failed `capacity/soak` failed, from its reasons and metrics: `queue` (only
    the TTFT drift failed while every planned request completed), `growth` (only memory or
    engine error counters), `stall` (anything else)."""
    m, said = g.metrics, g.reasons
    done = m.get("planned") is not None and m.get("completed") == m.get("planned")
    if said and done and all(r.startswith("TTFT drifted") for r in said):
        return "queue"
    if said and all(" grew " in r or r.startswith("engine error counter") for r in said):
        return "growth"
    return "stall"
