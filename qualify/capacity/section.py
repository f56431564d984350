"""The capacity stage in the decision document (matrix, per-kind decode, engine, incumbent, load,
soak, answers under load): a pure function of the stage's typed record and the decision's gates. A
figure the record does not hold is None and the document prints "no data"; nothing is recomputed
here."""

from __future__ import annotations

from pathlib import Path

from qualify.capacity.edge import held, versus
from qualify.capacity.firstscreen import _pct, _verdict, interval_pct, knee_line, soak_line
from qualify.capacity.loads import Load, OpenCell, ReplayCell, Sessions, Soak
from qualify.capacity.parts import Energy
from qualify.capacity.record import Answers, CellFigures, KindRow, MatrixRow, Record
from qualify.capacity.slo import Slo, bounds
from qualify.evidence.store import RunDir
from qualify.present.cells import Cell, Measure, drafted, given, nums
from qualify.present.plots import Panel, Plot
from qualify.present.record import GateOutcome
from qualify.present.sections import per_token_text
from qualify.present.wording import number


def section(record: Record | None, gates: list[GateOutcome]) -> dict[str, object]:
    """What the template's Capacity section shows."""
    return {"capacity": capacity(record), "load": load(record, gates)}


def plots(run: RunDir, record: Record | None, here: Path | None) -> list[Plot]:
    return [aggregate_plot(record)]


def energy_text(energy: Energy | None, j_per_token: float | None = None) -> str:
    """J per output token, or "unmeasured" (the why is said once, under the table)."""
    if energy is None:
        return per_token_text(j_per_token, None, None)
    j = j_per_token if j_per_token is not None else energy.j_per_output_token
    return per_token_text(j, energy.joules, energy.completion_tokens)


def slo_text(slo: Slo | None) -> str:
    """The SLOs a cell is judged under, and the goodput floor."""
    said = bounds(slo) if slo is not None else []
    if slo is None or not said:
        return "no SLO recorded"
    text = f"{', '.join(said)} at p{slo.percentile or 95:g}"
    if slo.goodput_floor:
        text += f", goodput floor {100 * slo.goodput_floor:.0f}%"
    if slo.ignored:
        text += f" (the candidate's looser {', '.join(slo.ignored)} not used)"
    return text


def _why_unmeasured(energies: list[Energy]) -> str | None:
    first = next((e.why for e in energies if e.why and energy_text(e) == "unmeasured"), None)
    return first if first is None or first.startswith("unmeasured") else f"unmeasured: {first}"


def cell_rows(cells: list[OpenCell]) -> list[dict[str, object]]:
    """Each open-loop cell's row (pace: the served share of the offer; under 0.9 the queue grew)."""
    out: list[dict[str, object]] = []
    for c in cells:
        offered = c.rate_rps if c.rate_rps is not None else c.offered_rps
        out.append(
            {
                "cell": c.cell or c.label,
                "arrival": f"trace {c.trace}" if isinstance(c, ReplayCell) else c.arrival,
                "offered": "burst"
                if c.arrival == "burst"
                else ("no data" if offered is None else f"{offered:.3f}"),
                "achieved": c.achieved_rps,
                "pace": c.pace,
                "requests": c.requests,
                "bad": c.failed + c.cut + c.unfinished + c.broken,
                "goodput": _pct(c.goodput),
                "interval": interval_pct(c.goodput_ci95),
                "good_rps": c.goodput_rps,
                "energy": energy_text(c.energy),
                "harness": c.harness_error,
            }
        )
    return out


def soak_text(soak: Soak | None, verdict: str) -> str:
    """The soak in one sentence: verdict, requests, progress, TTFT and memory drift."""
    if soak is None or not soak.model_fields_set:
        return "not run"
    head = f"{verdict}; {soak.duration_s or 0:g} s at {soak.rate_rps or 0:.3g} req/s"
    if soak.hung:
        head += f", hung: {soak.hung}"
        if soak.detected_after_s is not None:
            head += f" (seen after {soak.detected_after_s:.0f} s)"
    done = f"{soak.completed} of {soak.planned} completed"
    prog = soak.progress
    progress = (
        f"{prog.counter} +{prog.generated_delta:,.0f} over {prog.scrapes} scrapes"
        if prog.generated_delta is not None
        else f"no progress counter moved ({prog.counter or 'none read'})"
    )
    drift = soak.ttft_drift
    pct = drift.drift_pct
    ttft = "TTFT drift no data" if pct is None else f"TTFT p50 drift {pct:+.1f}%"
    if pct is not None:
        ttft += f" ({drift.first_p50_s:.2f} s -> {drift.last_p50_s:.2f} s)"
    growth = soak.memory.growth_mib
    memory = "memory growth no data" if growth is None else f"memory {growth:+,.1f} MiB"
    if soak.memory.source:
        memory += f" ({soak.memory.source})"
    moved = soak.error_counters
    errs = f"; engine error counters moved: {', '.join(moved)}" if moved else ""
    good = f"goodput {_pct(soak.goodput)}"
    return f"{head}: {done}, {good}; {progress}; {ttft}; {memory}{errs}{acceptance_text(soak)}"


def acceptance_text(soak: Soak) -> str:
    """The soak's acceptance per third (`capacity.specdrift`); nothing in a record without."""
    a = soak.acceptance_drift
    if a is None:
        return ""
    if a.why is not None or not a.thirds:
        return f"; acceptance: {a.why or 'no data'}"
    rates = _steps([t.rate for t in a.thirds], ".2f")
    lengths = " -> ".join(number(t.mean_length) for t in a.thirds)
    drift = "" if a.rate_drift_pct is None else f" ({a.rate_drift_pct:+.0f}%)"
    return f"; acceptance per third {rates}{drift}, mean accepted length {lengths}"


def _steps(values: list[float | None], fmt: str) -> str:
    return " -> ".join("no data" if v is None else format(v, fmt) for v in values)


def sessions_text(s: Sessions | None, verdict: str) -> str | None:
    """The agent sessions in one sentence; None when none ran."""
    if s is None:
        return None
    right = sum(1 for t in s.turns if not (t.failed or t.cut or t.broken))
    return (
        f"{verdict}; {s.count} sessions × 3 turns, {right} of {len(s.turns)} turns right, "
        f"goodput {_pct(s.goodput)}; TTFT p50 by turn {_steps(s.ttft_p50_s_by_turn, '.2f')} s; "
        f"prompt tokens {_steps(s.prompt_tokens_by_turn, '.0f')} "
        f"(cached {_steps(s.cached_tokens_by_turn, '.0f')})"
    )


def answers_text(answers: Answers, gates: list[GateOutcome]) -> str:
    """How many answers under load were judged and how many broke, and which cells."""
    if not answers.model_fields_set:
        return "no answers judged under load"
    cells = [c.where for c in answers.cells if c.broken]
    where = f" (in {', '.join(cells)})" if cells else ""
    return (
        f"{answers.judged} judged, {answers.broken} broken{where}; `capacity/answers`: "
        f"{_verdict(gates, 'answers')}"
    )


def knee_claim(ld: Load) -> str:
    """The knee's statement with what its step completed: the rate served over the step's
    window, and the requests the goodput rests on."""
    knee = ld.knee
    if knee is None or not knee.statement:
        return "no knee stated"
    cell = next((c for c in ld.cells if knee.cell and c.cell == knee.cell), None)
    if knee.rate_rps is None or cell is None or cell.achieved_rps is None:
        return knee.statement
    return (
        f"{knee.statement}; that step was offered {knee.rate_rps:.3g} req/s and completed "
        f"{cell.achieved_rps:.3g} req/s ({cell.completed} requests)"
    )


def load(record: Record | None, gates: list[GateOutcome]) -> dict[str, object] | None:
    """The load part of the capacity section, or None when the stage ran no load."""
    if record is None or not record.load.model_fields_set:
        return None
    ld = record.load
    knee, soak, length = ld.knee, ld.soak, ld.length
    energies = [c.energy for c in ld.cells] + [soak.energy if soak is not None else None]
    energies += [m.energy for m in record.matrix]
    planned = (length.planned_tokens or length.target) if length is not None else None
    return {
        "statement": knee_claim(ld),
        "stopped": knee.stopped if knee is not None else None,
        "slo": slo_text(ld.slo or record.slo),
        "where": (
            f"{ld.lane or 'candidate'} lane, {ld.kind or 'prose'} prompts of "
            f"{planned or 'no data'} tokens, {ld.requests} requests in {ld.wall_s or 0:.0f} s"
        ),
        "goodput_gate": _verdict(gates, "goodput"),
        "cells": cell_rows([*ld.cells, *ld.replay]),
        "soak": soak_text(soak, _verdict(gates, "soak")),
        "answers": answers_text(record.answers, gates),
        "sessions": sessions_text(ld.sessions, _verdict(gates, "sessions")),
        "unmeasured": _why_unmeasured([e for e in energies if e is not None]),
        "edge": edge_part(ld, knee.goodput_floor if knee is not None else 0.0),
        "ray": ray_rows([*ld.cells, *(ld.incumbent.cells if ld.incumbent else [])]),
    }


def _ms(x: float | None, sign: bool = False) -> str:
    return "no data" if x is None else (f"{x:+.2f} ms" if sign else f"{x:.2f} ms")


def ray_rows(cells: list[OpenCell]) -> list[dict[str, object]]:
    """Each cell that ran on Ray workers (`qualify.capacity.spread`): its clock uncertainty
    against the house's bound, and how each worker ran or that it was lost."""
    out: list[dict[str, object]] = []
    for c in cells:
        sp = c.spread
        if sp is None:
            continue
        workers = []
        for w in sp.workers:
            head = f"worker {w.worker} on {w.node[:8] or '?'}" + (f" ({w.host})" if w.host else "")
            if w.lost:
                workers.append(f"{head}: lost ({w.lost})")
                continue
            workers.append(
                f"{head}: offset {_ms(w.offset_ms, True)} ± {_ms(w.uncertainty_ms)}, "
                f"lag p99 {_ms(w.lag.send_lag_ms_p99)}, {w.cpu_s or 0:.2f} s CPU"
            )
        bound = sp.uncertainty_bound_ms
        out.append(
            {
                "cell": c.cell or c.label,
                "uncertainty": f"{_ms(sp.uncertainty_ms)} (bound {_ms(bound)})",
                "placement": sp.placement or "not placed",
                "workers": "; ".join(workers) or "none started",
            }
        )
    return out


def _lane_text(c: OpenCell | None, floor: float) -> str:
    pace = "no pace" if c is None or c.pace is None else f"pace {c.pace:.2f}"
    said = "held" if held(c, floor) else "not held"
    harness = f", harness: {c.harness_error}" if c is not None and c.harness_error else ""
    return f"{_pct(c.goodput if c is not None else None)}, {pace}, {said}{harness}"


def edge_part(ld: Load, floor: float) -> dict[str, object] | None:
    """The incumbent at the candidate's edge (`qualify.capacity.edge`); None when not run."""
    e = ld.incumbent
    if e is None:
        return None
    rows = [
        {
            "rate": "no data" if inc.rate_rps is None else f"{inc.rate_rps:.3g}",
            "candidate": _lane_text(cand, floor),
            "incumbent": _lane_text(inc, floor),
            "energy": " / ".join(
                per_token_text(c.energy.j_per_output_token if c and c.energy else None, None, None)
                for c in (cand, inc)
            ),
            "lead": lead,
        }
        for cand, inc, lead in versus(ld.cells, e.cells, floor)
    ]
    return {"status": e.status, "why": e.why, "rows": rows}


def matrix_extras(row: MatrixRow) -> str:
    """What a closed-loop cell adds to its aggregate: goodput, J per output token if measured."""
    parts = []
    if row.goodput is not None:
        parts.append(f"goodput {_pct(row.goodput)}")
    energy = energy_text(row.energy, row.j_per_output_token)
    if energy != "unmeasured":
        parts.append(energy)
    return ", ".join(parts)


def capacity(record: Record | None) -> dict[str, object]:
    """The matrix, per-kind decode, the engine's own capacity and the incumbent."""
    record = record if record is not None else Record()
    inc = record.incumbent if "incumbent" in record.model_fields_set else None
    eng = record.engine
    return {
        "grid": capacity_grid(record.matrix, eng.slots),
        "kind_grid": kind_grid(record.kinds),
        "engine": {"kv_tokens": eng.kv_tokens, "concurrency": eng.max_concurrency_at_full_context},
        "incumbent": {"status": inc.status, "why": inc.why}
        if inc is not None
        else {"status": "not recorded", "why": None},
        "left_out": left_out(record),
    }


def best(record: Record | None) -> MatrixRow | None:
    """The candidate's cell of the highest aggregate output, if any cell recorded one."""
    rows = [r for r in record.cells() if r.aggregate_output_tok_s is not None] if record else []
    return max(rows, key=lambda r: r.aggregate_output_tok_s or 0.0, default=None)


def capacity_grid(matrix: list[MatrixRow], slots: int | None) -> dict[str, object]:
    """The candidate's matrix as prompt length x concurrency; a concurrency above the engine's
    slots is marked (requests queue)."""
    mine = [r for r in matrix if r.lane == "candidate"]
    conc = sorted({r.concurrency for r in mine})
    lengths = sorted({r.length for r in mine})
    cells = {(r.length, r.concurrency): r for r in mine}
    grid = []
    for n in lengths:
        row = []
        for c in conc:
            r = cells.get((n, c))
            row.append(
                None
                if r is None
                else {
                    "aggregate": r.aggregate_output_tok_s,
                    "decode": r.decode_tok_s_p50,
                    "failed": r.failed + r.cut,
                    "extra": matrix_extras(r),
                }
            )
        grid.append({"length": n, "cells": row})
    heads = [f"c={c}" + (" (queued)" if slots is not None and c > slots else "") for c in conc]
    return {"heads": heads, "rows": grid, "slots": slots}


def kind_grid(kinds: list[KindRow]) -> dict[str, object]:
    """Per-kind decode as a kind x prompt-depth grid, with the longer axis down the rows (one
    depth and four kinds is one row of four, not four rows of one)."""
    depths = sorted({k.depth for k in kinds})
    names = list(dict.fromkeys(k.kind for k in kinds))
    cells = {(k.kind, k.depth): k for k in kinds}

    def cell(n: str, d: int) -> dict[str, object] | None:
        k = cells.get((n, d))
        return (
            None if k is None else {"decode": k.decode_tok_s_p50, "acceptance": k.acceptance_rate}
        )

    if len(depths) >= len(names):
        rows = [{"label": n, "cells": [cell(n, d) for d in depths]} for n in names]
        heads = [f"{d:,}" for d in depths]
        return {"corner": "Kind", "heads": heads, "rows": rows, "axes": "kind x prompt depth"}
    rows = [{"label": f"{d:,}", "cells": [cell(n, d) for n in names]} for d in depths]
    return {"corner": "Prompt depth", "heads": names, "rows": rows, "axes": "prompt depth x kind"}


def left_out(record: Record) -> str | None:
    """The degenerate answers the capacity record kept out of every speed figure."""
    runs = sum(r.degenerate for m in record.matrix for r in m.run_records)
    n = max(len(record.degenerate), runs)
    if not n:
        return None
    return f"{n} degenerate answer(s) left out of every speed figure (kept as evidence)."


def aggregate_plot(record: Record | None) -> Plot:
    """Aggregate output tok/s against concurrency, one line per lane and prompt length."""
    panel = Panel("aggregate output (tok/s)")
    for r in record.matrix if record is not None else []:
        if r.aggregate_output_tok_s is None:
            continue
        label = f"{r.lane} {r.length} tok"
        panel.series.setdefault(label, []).append((float(r.concurrency), r.aggregate_output_tok_s))
    panel.series = {k: sorted(v) for k, v in sorted(panel.series.items())}
    return Plot("capacity-aggregate.png", "Capacity", "concurrency", [panel])


def figures(record: Record | None, gates: list[GateOutcome]) -> list[str]:
    """Its headline lines: the best aggregate throughput and where; the knee and the soak."""
    out = []
    top = best(record)
    if top is not None:
        out.append(
            f"capacity: {number(top.aggregate_output_tok_s)} tok/s aggregate at "
            f"c={top.concurrency}, {number(top.length, 0)}-token prompts"
        )
    if record is not None and record.load.model_fields_set:
        out.append(f"load: {knee_line(record.load)}; {soak_line(record.load, gates)}")
    return out


def _capacity_figures(c: Cell, row: CellFigures) -> None:
    for k in ("decode_tok_s_p50", "aggregate_output_tok_s"):
        c.measures[k] = Measure("tok/s", "higher", nums(getattr(row.run_values, k)))


def diff_cells(rec: Record) -> list[Cell]:
    """The candidate's matrix cells and content kinds (per-run decode, aggregate, TTFT, E2E),
    replays, the soak's acceptance and the agent sessions' turns."""
    base = given(rec.settings, ("max_tokens", "ignore_eos", "level"))
    out: list[Cell] = []
    for e in rec.cells("candidate"):
        c = Cell("capacity", e.cell, {**base, "concurrency": e.concurrency})
        c.setting["length"] = e.length
        _capacity_figures(c, e)
        counted = [r for r in e.run_records if not r.excluded]
        c.measures["ttft_p50_s"] = Measure("s", "lower", nums(r.ttft_p50_s for r in counted))
        c.measures["e2e_p50_s"] = Measure("s", "lower", nums(r.e2e_p50_s for r in counted))
        out.append(c)
    for k in rec.kinds:
        c = Cell("capacity kinds", k.cell, {**base, "kind": k.kind, "depth": k.depth})
        _capacity_figures(c, k)
        out.append(c)
        if (rate := drafted(k.acceptance, k.requests)) is not None:
            out.append(Cell("acceptance", f"kind {k.cell}", c.setting, {"acceptance": rate}))
    for r in rec.load.replay:
        c = Cell("capacity replay", r.cell, {**base, "trace": r.trace, "scale": r.scale})
        c.measures["goodput"] = Measure("rate", "higher", counts=(r.good, r.requests))
        c.measures["ttft_s"] = Measure("s", "lower", nums(st.ttft_s for st in r.streams))
        out.append(c)
    soak = rec.load.soak
    a = soak.acceptance_drift if soak is not None else None
    thirds = a.thirds if a is not None and len(a.thirds) == 3 else []
    for name, t in (("first", thirds[0]), ("last", thirds[-1])) if thirds else ():
        if t.draft_tokens:  # the soak's first and last third's acceptance, as counts
            c = Cell("acceptance", f"soak {name} third", base)
            c.measures["acceptance"] = Measure(
                "rate", "higher", counts=(t.accepted, t.draft_tokens)
            )
            out.append(c)
    sessions = rec.load.sessions
    for n in range(1, 4) if sessions is not None else []:  # per turn of the agent sessions
        turns = [t for t in sessions.turns if t.turn == n] if sessions is not None else []
        c = Cell("capacity sessions", f"turn {n}", {**base, "turn": n})
        c.measures["ttft_s"] = Measure("s", "lower", nums(t.ttft_s for t in turns))
        right = sum(1 for t in turns if not (t.failed or t.cut or t.broken))
        c.measures["right"] = Measure("rate", "higher", counts=(right, len(turns)))
        out.append(c)
    return out
