"""The capacity stage in the decision document: the load results of its record.

A pure function of the record's `data` (`qualify.capacity.record.Record`, its JSON form) and the
decision's gates: the knee's statement ("serves R req/s at goodput G under SLO S" with its
interval), the SLOs it was judged under, every open-loop cell's goodput and energy per output
token, the soak's verdict with its progress and drift, and the answers judged under load. A
figure the record does not hold is None and the document prints "no data"; nothing is
recomputed here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from qualify.decision.plots import Panel, Plot, num
from qualify.decision.record import GateOutcome
from qualify.decision.sections import energy_text
from qualify.evidence.store import RunDir
from qualify.records import Verdict


def _d(x: Any) -> dict[str, Any]:
    return x if isinstance(x, dict) else {}


def _l(x: Any) -> list[Any]:
    return x if isinstance(x, list) else []


def _n(x: Any) -> float | None:
    return float(x) if isinstance(x, int | float) and not isinstance(x, bool) else None


def _pct(x: Any) -> str:
    v = _n(x)
    return "no data" if v is None else f"{100 * v:.0f}%"


def interval_pct(ci: Any) -> str:
    """A [low, high] share as `65%–100%`, or "" when not recorded."""
    ci = _l(ci)
    if len(ci) != 2 or any(_n(v) is None for v in ci):
        return ""
    return f"{100 * ci[0]:.0f}%–{100 * ci[1]:.0f}%"


def slo_text(slo: dict[str, Any]) -> str:
    """The SLOs a cell is judged under, and the goodput floor."""
    bounds = [
        f"{label} ≤ {v:g} s"
        for key, label in (("ttft_s", "TTFT"), ("tpot_s", "TPOT"), ("e2e_s", "E2E"))
        if (v := _n(slo.get(key))) is not None
    ]
    if not bounds:
        return "no SLO recorded"
    text = f"{', '.join(bounds)} at p{_n(slo.get('percentile')) or 95:g}"
    floor = _n(slo.get("goodput_floor"))
    if floor:
        text += f", goodput floor {100 * floor:.0f}%"
    ignored = [str(x) for x in _l(slo.get("ignored"))]
    if ignored:
        text += f" (the candidate's looser {', '.join(ignored)} not used)"
    return text


def _why_unmeasured(energies: list[dict[str, Any]]) -> str | None:
    whys = [str(e.get("why")) for e in energies if e.get("why") and energy_text(e) == "unmeasured"]
    if not whys:
        return None
    first = whys[0]
    return first if first.startswith("unmeasured") else f"unmeasured: {first}"


def _verdict(gates: list[GateOutcome], name: str) -> str:
    mine = [g for g in gates if g.stage == "capacity" and g.gate.split("@", 1)[0] == name]
    if not mine:
        return "no gate"
    bad = [g for g in mine if g.verdict is not Verdict.PASS]
    return ", ".join(f"`{g.key}` {g.verdict.value}" for g in bad) if bad else "pass"


def cell_rows(cells: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each open-loop cell: arrival, offered and achieved rate, requests, goodput with its
    interval, good requests per second, energy per output token."""
    out = []
    for c in cells:
        rate = _n(c.get("rate_rps"))
        out.append(
            {
                "cell": c.get("cell") or c.get("label"),
                "arrival": c.get("arrival") or "no data",
                "offered": "burst" if c.get("arrival") == "burst" else _rate(rate, c),
                "achieved": _n(c.get("achieved_rps")),
                "requests": c.get("requests"),
                "bad": sum(int(c.get(k) or 0) for k in ("failed", "cut", "unfinished", "broken")),
                "goodput": _pct(c.get("goodput")),
                "interval": interval_pct(c.get("goodput_ci95")),
                "good_rps": _n(c.get("goodput_rps")),
                "energy": energy_text(_d(c.get("energy"))),
                "harness": c.get("harness_error"),
            }
        )
    return out


def _rate(rate: float | None, cell: dict[str, Any]) -> str:
    value = rate if rate is not None else _n(cell.get("offered_rps"))
    return "no data" if value is None else f"{value:.3f}"


def soak_text(soak: dict[str, Any], verdict: str) -> str:
    """The soak in one sentence: verdict, requests, progress, TTFT and memory drift."""
    if not soak:
        return "not run"
    rate, dur = _n(soak.get("rate_rps")), _n(soak.get("duration_s"))
    head = f"{verdict}; {dur or 0:g} s at {rate or 0:.3g} req/s"
    if soak.get("hung"):
        head += f", hung: {soak['hung']}"
        if _n(soak.get("detected_after_s")) is not None:
            head += f" (seen after {soak['detected_after_s']:.0f} s)"
    done = f"{soak.get('completed')} of {soak.get('planned')} completed"
    prog = _d(soak.get("progress"))
    delta = _n(prog.get("generated_delta"))
    progress = (
        f"{prog.get('counter')} +{delta:,.0f} over {prog.get('scrapes')} scrapes"
        if delta is not None
        else f"no progress counter moved ({prog.get('counter') or 'none read'})"
    )
    drift = _d(soak.get("ttft_drift"))
    pct = _n(drift.get("drift_pct"))
    ttft = "TTFT drift no data" if pct is None else f"TTFT p50 drift {pct:+.1f}%"
    if pct is not None:
        ttft += f" ({drift.get('first_p50_s'):.2f} s -> {drift.get('last_p50_s'):.2f} s)"
    mem = _d(soak.get("memory"))
    growth = _n(mem.get("growth_mib"))
    memory = "memory growth no data" if growth is None else f"memory {growth:+,.1f} MiB"
    if mem.get("source"):
        memory += f" ({mem['source']})"
    errors = _d(soak.get("error_counters"))
    errs = f"; engine error counters moved: {', '.join(errors)}" if errors else ""
    good = f"goodput {_pct(soak.get('goodput'))}"
    return f"{head}: {done}, {good}; {progress}; {ttft}; {memory}{errs}"


def answers_text(answers: dict[str, Any], gates: list[GateOutcome]) -> str:
    """How many answers under load were judged and how many broke, and which cells."""
    if not answers:
        return "no answers judged under load"
    judged, broken = answers.get("judged"), answers.get("broken")
    cells = [
        str(c.get("where")) for c in (_d(x) for x in _l(answers.get("cells"))) if c.get("broken")
    ]
    where = f" (in {', '.join(cells)})" if cells else ""
    return (
        f"{judged} judged, {broken} broken{where}; `capacity/answers`: {_verdict(gates, 'answers')}"
    )


def load(data: dict[str, Any], gates: list[GateOutcome]) -> dict[str, Any] | None:
    """The load part of the capacity section, or None when the stage ran no load."""
    ld = _d(data.get("load"))
    if not ld:
        return None
    knee, soak = _d(ld.get("knee")), _d(ld.get("soak"))
    slo = _d(ld.get("slo")) or _d(data.get("slo"))
    length = _d(ld.get("length"))
    cells = [_d(c) for c in _l(ld.get("cells"))]
    energies = [_d(c.get("energy")) for c in cells] + [_d(soak.get("energy"))]
    energies += [_d(_d(m).get("energy")) for m in _l(data.get("matrix"))]
    return {
        "statement": knee.get("statement") or "no knee stated",
        "stopped": knee.get("stopped"),
        "slo": slo_text(slo),
        "where": (
            f"{ld.get('lane') or 'candidate'} lane, {ld.get('kind') or 'prose'} prompts of "
            f"{length.get('planned_tokens') or length.get('target') or 'no data'} tokens, "
            f"{ld.get('requests')} requests in {_n(ld.get('wall_s')) or 0:.0f} s"
        ),
        "goodput_gate": _verdict(gates, "goodput"),
        "cells": cell_rows(cells),
        "soak": soak_text(soak, _verdict(gates, "soak")),
        "answers": answers_text(_d(data.get("answers")), gates),
        "unmeasured": _why_unmeasured([e for e in energies if e]),
    }


def matrix_extras(row: dict[str, Any]) -> str:
    """What a closed-loop cell adds to its aggregate: goodput, and J per output token when
    measured."""
    parts = []
    if _n(row.get("goodput")) is not None:
        parts.append(f"goodput {_pct(row.get('goodput'))}")
    energy = energy_text(_d(row.get("energy")), row.get("j_per_output_token"))
    if energy != "unmeasured":
        parts.append(energy)
    return ", ".join(parts)


def _first_number(d: dict[str, Any], *keys: str) -> float | None:
    for k in keys:
        v = d.get(k)
        if isinstance(v, int | float) and not isinstance(v, bool):
            return float(v)
    return None


CAPACITY_KEYS = (
    "length",
    "concurrency",
    "decode_tok_s_p50",
    "aggregate_output_tok_s",
    "ttft_p50_s",
    "ttft_p95_s",
    "e2e_p50_s",
    "failed",
    "cut",
    "goodput",
    "energy",
    "j_per_output_token",
)


def capacity(data: dict[str, Any]) -> dict[str, Any]:
    """The matrix, per-kind decode, the engine's own capacity and the incumbent."""
    matrix = [_d(r) for r in _l(data.get("matrix"))]
    rows = [
        {"lane": r.get("lane") or "candidate"} | {k: r.get(k) for k in CAPACITY_KEYS}
        for r in matrix
    ]
    kinds = [
        {
            "kind": k.get("kind"),
            "depth": k.get("depth"),
            "decode": k.get("decode_tok_s_p50"),
            "acceptance": k.get("acceptance_rate"),
        }
        for k in (_d(x) for x in _l(data.get("kinds")))
    ]
    eng = _d(data.get("engine"))
    inc = _d(data.get("incumbent"))
    best = max(
        (
            r
            for r in rows
            if r["lane"] == "candidate" and isinstance(r.get("aggregate_output_tok_s"), int | float)
        ),
        key=lambda r: float(r["aggregate_output_tok_s"]),
        default=None,
    )
    return {
        "rows": rows,
        "grid": capacity_grid(rows, eng),
        "kinds": kinds,
        "kind_grid": kind_grid(kinds),
        "engine": {
            "kv_tokens": eng.get("kv_tokens"),
            "concurrency": _first_number(
                eng,
                "max_concurrency_at_full_context",
                "max_concurrency",
                "concurrency_at_full_context",
            ),
            "slots": eng.get("slots"),
        },
        "incumbent": {
            "status": inc.get("status") or "not recorded",
            "why": inc.get("why"),
            "candidate": inc.get("candidate"),
        },
        "best": best,
        "not_run": [_d(x) for x in _l(data.get("not_run"))],
        "left_out": left_out(data),
    }


def capacity_grid(rows: list[dict[str, Any]], eng: dict[str, Any]) -> dict[str, Any]:
    """The candidate's matrix as prompt length x concurrency: aggregate tok/s (decode p50 per
    stream) per cell; a concurrency above the engine's slots is marked (requests queue)."""
    mine = [r for r in rows if r.get("lane") == "candidate"]
    conc = sorted({r["concurrency"] for r in mine if isinstance(r.get("concurrency"), int)})
    lengths = sorted({r["length"] for r in mine if isinstance(r.get("length"), int)})
    slots = eng.get("slots")
    cells = {(r.get("length"), r.get("concurrency")): r for r in mine}
    grid = []
    for n in lengths:
        row = []
        for c in conc:
            r = cells.get((n, c))
            row.append(
                None
                if r is None
                else {
                    "aggregate": r.get("aggregate_output_tok_s"),
                    "decode": r.get("decode_tok_s_p50"),
                    "failed": (r.get("failed") or 0) + (r.get("cut") or 0),
                    "extra": matrix_extras(r),
                }
            )
        grid.append({"length": n, "cells": row})
    heads = [f"c={c}" + (" (queued)" if isinstance(slots, int) and c > slots else "") for c in conc]
    return {"heads": heads, "rows": grid, "slots": slots}


def kind_grid(kinds: list[dict[str, Any]]) -> dict[str, Any]:
    """Per-kind decode as a kind x prompt-depth grid, with the longer axis down the rows (one
    depth and four kinds is one row of four, not four rows of one)."""
    depths = sorted({k["depth"] for k in kinds if isinstance(k.get("depth"), int)})
    names = list(dict.fromkeys(str(k.get("kind")) for k in kinds))
    cells = {(str(k.get("kind")), k.get("depth")): k for k in kinds}

    def cell(n: str, d: int) -> dict[str, Any] | None:
        k = cells.get((n, d))
        return None if k is None else {"decode": k.get("decode"), "acceptance": k.get("acceptance")}

    if len(depths) >= len(names):
        rows = [{"label": n, "cells": [cell(n, d) for d in depths]} for n in names]
        return {
            "corner": "Kind",
            "heads": [f"{d:,}" for d in depths],
            "rows": rows,
            "axes": "kind x prompt depth",
        }
    rows = [{"label": f"{d:,}", "cells": [cell(n, d) for n in names]} for d in depths]
    return {"corner": "Prompt depth", "heads": names, "rows": rows, "axes": "prompt depth x kind"}


def left_out(data: dict[str, Any]) -> str | None:
    """The degenerate answers the capacity record kept out of every speed figure, from its own
    fields (`degenerate`, and each counted run's `degenerate` count)."""
    listed = len(_l(data.get("degenerate")))
    runs = sum(
        int(_d(r).get("degenerate") or 0)
        for m in _l(data.get("matrix"))
        for r in _l(_d(m).get("run_records"))
    )
    n = max(listed, runs)
    if not n:
        return None
    return f"{n} degenerate answer(s) left out of every speed figure (kept as evidence)."


def section(data: dict[str, Any], gates: list[GateOutcome]) -> dict[str, Any]:
    """What the template's Capacity section shows."""
    return {"capacity": capacity(data), "load": load(data, gates)}


def plots(run: RunDir, data: dict[str, Any], here: Path | None) -> list[Plot]:
    return [aggregate_plot(data)]


def aggregate_plot(cap: dict[str, Any]) -> Plot:
    """Aggregate output tok/s against concurrency, one line per lane and prompt length."""
    panel = Panel("aggregate output (tok/s)")
    for r in (_d(x) for x in _l(cap.get("matrix"))):
        c, y = num(r.get("concurrency")), num(r.get("aggregate_output_tok_s"))
        if c is None or y is None:
            continue
        label = f"{r.get('lane', 'candidate')} {r.get('length')} tok"
        panel.series.setdefault(label, []).append((c, y))
    panel.series = {k: sorted(v) for k, v in sorted(panel.series.items())}
    return Plot("capacity-aggregate.png", "Capacity", "concurrency", [panel])
