"""Per figure, the delta from run A to run B where both measured the same cell, with its interval.

Each stage's typed record is read into cells: a cell is what was measured under one setting (a
capacity length x concurrency, a context rung x pass x content, the A/B prompt set, a card in a
stage), and holds measures: per-run values (the figure is their median; the interval is the seeded
bootstrap of the difference of medians, `qualify.ab.stats.bootstrap_delta_ci`, resampling runs)
or counts (a rate of successes over trials; the interval is Newcombe's hybrid score interval of
the difference of two proportions, from Wilson intervals).

A cell is compared only when both runs measured it under the same setting, on the same engine
and hardware; otherwise it is `not comparable`, with why. A compared figure is a regression when
its whole 95% interval lies worse than the house's margin (`ab_max_regression_pct`, in per cent of
A's figure); one reading per run has no interval and is never counted, only shown.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any

from pydantic import BaseModel

from qualify.ab.record import Acceptance
from qualify.ab.record import Record as AbRecord
from qualify.ab.stats import bootstrap_delta_ci
from qualify.capacity.record import CellFigures
from qualify.capacity.record import Record as CapacityRecord
from qualify.context.record import Record as ContextRecord
from qualify.context.record import Row
from qualify.httpclient.timing import median
from qualify.present.reading import record_of
from qualify.records import StageRecord
from qualify.vram.record import Record as VramRecord

Z95 = NormalDist().inv_cdf(0.975)


@dataclass
class Measure:
    unit: str
    better: str  # "higher" | "lower"
    values: list[float] = field(default_factory=list)
    counts: tuple[int, int] | None = None  # (successes, trials) for a rate

    @property
    def figure(self) -> float | None:
        if self.counts is not None:
            s, n = self.counts
            return s / n if n else None
        return median(self.values)

    @property
    def n(self) -> int:
        return self.counts[1] if self.counts is not None else len(self.values)


@dataclass
class Cell:
    group: str
    cell: str
    setting: dict[str, Any]
    measures: dict[str, Measure] = field(default_factory=dict)
    stage: str = ""


def _nums(xs: Iterable[float | int | None]) -> list[float]:
    return [float(x) for x in xs if isinstance(x, int | float) and not isinstance(x, bool)]


def _given(model: BaseModel, names: tuple[str, ...]) -> dict[str, Any]:
    """The named fields as the record wrote them: a field it did not write is None (not its
    default), so a run of an earlier build compares under the setting it recorded."""
    return {n: getattr(model, n) if n in model.model_fields_set else None for n in names}


def _digest(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()[:12]


# --- extraction, one function per stage ------------------------------------------------------


def _acceptance(acc: Acceptance | None) -> tuple[int, int] | None:
    """(accepted, draft tokens) when the lane drafted any, else None."""
    if acc is None or acc.draft_tokens is None or acc.draft_tokens <= 0:
        return None
    return int(acc.accepted or 0), acc.draft_tokens


def ab_cells(rec: AbRecord) -> list[Cell]:
    """The candidate lane over the A/B prompt set: per-run p50s, draft acceptance, and the
    paired answers identical to the control's (`qualify.ab.lossless`)."""
    names = ("max_tokens", "temperature", "concurrency", "level", "nonce")
    settings = _given(rec.settings, names) if rec.settings else dict.fromkeys(names)
    setting = {"prompts": _digest([f"{p.id}:{p.kind}" for p in rec.prompts]), **settings}
    lane = rec.lanes.get("candidate")
    runs = lane.runs if lane else []
    cell = Cell("ab", "candidate lane", setting)
    cell.measures["decode_tok_s"] = Measure(
        "tok/s", "higher", _nums(r.p50.decode_tok_s for r in runs)
    )
    cell.measures["ttft_s"] = Measure("s", "lower", _nums(r.p50.ttft_s for r in runs))
    cell.measures["e2e_s"] = Measure("s", "lower", _nums(r.p50.e2e_s for r in runs))
    agg = _nums(r.aggregate_output_tok_s for r in runs)
    if agg:
        cell.measures["aggregate_output_tok_s"] = Measure("tok/s", "higher", agg)
    out = [cell]
    acc = rec.acceptance
    if (counts := _acceptance(acc)) is not None and acc is not None:
        a = Cell("acceptance", "ab candidate lane", setting)
        a.measures["acceptance"] = Measure("rate", "higher", counts=counts)
        drafts = int(acc.drafts or 0)
        for i, k in enumerate(acc.accepted_per_position):
            if drafts:
                a.measures[f"position {i}"] = Measure("rate", "higher", counts=(k, drafts))
        out.append(a)
    if (ll := rec.lossless) is not None and ll.tokens:
        same = Cell("lossless", "ab paired answers", setting)
        same.measures["identical answers"] = Measure(
            "rate", "higher", counts=(ll.identical, ll.pairs)
        )
        same.measures["identical tokens"] = Measure(
            "rate", "higher", counts=(ll.tokens_before, ll.tokens)
        )
        out.append(same)
    return out


def _capacity_figures(c: Cell, row: CellFigures) -> None:
    rv = row.run_values
    c.measures["decode_tok_s_p50"] = Measure("tok/s", "higher", _nums(rv.decode_tok_s_p50))
    c.measures["aggregate_output_tok_s"] = Measure(
        "tok/s", "higher", _nums(rv.aggregate_output_tok_s)
    )


def capacity_cells(rec: CapacityRecord) -> list[Cell]:
    """The candidate's matrix cells and content kinds: per-run decode, aggregate, TTFT, E2E."""
    base = _given(rec.settings, ("max_tokens", "ignore_eos", "level"))
    out: list[Cell] = []
    for e in rec.cells("candidate"):
        c = Cell("capacity", e.cell, {**base, "concurrency": e.concurrency})
        c.setting["length"] = e.length
        _capacity_figures(c, e)
        counted = [r for r in e.run_records if not r.excluded]
        c.measures["ttft_p50_s"] = Measure("s", "lower", _nums(r.ttft_p50_s for r in counted))
        c.measures["e2e_p50_s"] = Measure("s", "lower", _nums(r.e2e_p50_s for r in counted))
        out.append(c)
    for k in rec.kinds:
        c = Cell("capacity kinds", k.cell, {**base, "kind": k.kind, "depth": k.depth})
        _capacity_figures(c, k)
        out.append(c)
        if (counts := _acceptance(k.acceptance)) is not None:
            a = Cell("acceptance", f"kind {k.cell}", c.setting)
            a.measures["acceptance"] = Measure("rate", "higher", counts=counts)
            out.append(a)
    return out


def _context_cell(row: Row, level: str | None) -> Cell:
    key = f"{row.planned_tokens} {row.pass_} {row.content} c={row.concurrency}"
    setting = {
        "planned_tokens": row.planned_tokens,
        "pass": row.pass_,
        "content": row.content,
        "concurrency": row.concurrency,
        "level": level,
    }
    streams = [s for s in row.streams if not s.problem]
    speedy = [s for s in streams if not s.degenerate]
    c = Cell("context", key, setting)
    c.measures["ttfo_s"] = Measure("s", "lower", _nums(s.ttfo_s for s in streams))
    c.measures["effective_prefill_tok_s"] = Measure(
        "tok/s", "higher", _nums(s.effective_prefill_tok_s for s in streams)
    )
    c.measures["decode_tok_s"] = Measure("tok/s", "higher", _nums(s.decode_tok_s for s in speedy))
    needles = [all(s.needles.values()) for s in streams if s.needles]
    if needles:
        c.measures["needles found"] = Measure("rate", "higher", counts=(sum(needles), len(needles)))
    return c


def context_cells(rec: ContextRecord) -> list[Cell]:
    """Per rung (the size run), pass, content and concurrency: every counted stream's figures;
    per rung and task kind, the audit's checks passed (`audits`, when the stage ran them)."""
    level = _given(rec, ("level",))["level"]
    out = [_context_cell(row, level) for row in rec.rows if row.verdict != "error"]
    tasks: dict[str, Cell] = {}
    for a in rec.audits.by_kind if rec.audits else []:
        key = f"{a.planned_tokens} {a.pass_} {a.content} ({a.form})"
        setting = {"planned_tokens": a.planned_tokens, "pass": a.pass_, "content": a.content}
        setting["form"] = a.form
        # The depths are not matched: aggregation's notes are placed at random per run.
        c = tasks.setdefault(key, Cell("context tasks", key, {**setting, "level": level}))
        c.measures[a.kind] = Measure("rate", "higher", counts=(a.passed, a.asked))
    out.extend(tasks.values())
    return out


def vram_cells(rec: VramRecord) -> list[Cell]:
    """Per card and stage: the lowest free memory seen (one reading per run)."""
    out: list[Cell] = []
    for card in rec.cards:
        setting = {"name": card.name, "total_mib": card.total_mib}
        for stage, s in sorted(card.stages.items()):
            c = Cell("vram", f"gpu {card.gpu} {stage}", setting)
            c.measures["min_free_mib"] = Measure("MiB", "higher", _nums([s.min_free_mib]))
            out.append(c)
    return out


def cells_of(records: Mapping[str, StageRecord]) -> dict[tuple[str, str], Cell]:
    cells: list[Cell] = []
    if ab := record_of(records, "ab", AbRecord):
        cells += [dataclasses.replace(c, stage="ab") for c in ab_cells(ab)]
    if capacity := record_of(records, "capacity", CapacityRecord):
        cells += [dataclasses.replace(c, stage="capacity") for c in capacity_cells(capacity)]
    if context := record_of(records, "context", ContextRecord):
        cells += [dataclasses.replace(c, stage="context") for c in context_cells(context)]
    if vram := record_of(records, "vram", VramRecord):
        cells += [dataclasses.replace(c, stage="vram") for c in vram_cells(vram)]
    return {(c.group, c.cell): c for c in cells}


# --- intervals -------------------------------------------------------------------------------


def wilson(s: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval of a proportion s/n."""
    p = s / n
    den = 1 + z * z / n
    mid = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return max(0.0, mid - half), min(1.0, mid + half)


def newcombe(a: tuple[int, int], b: tuple[int, int]) -> tuple[float, float] | None:
    """95% interval of p_b - p_a (Newcombe's hybrid score method); None without trials."""
    (sa, na), (sb, nb) = a, b
    if na <= 0 or nb <= 0:
        return None
    pa, pb = sa / na, sb / nb
    la, ua = wilson(sa, na)
    lb, ub = wilson(sb, nb)
    d = pb - pa
    return d - math.sqrt((pb - lb) ** 2 + (ua - pa) ** 2), d + math.sqrt(
        (ub - pb) ** 2 + (pa - la) ** 2
    )


# --- comparison ------------------------------------------------------------------------------


def judge(gain_pct: float | None, gain_ci: tuple[float, float] | None, margin: float) -> str:
    """The verdict of one compared figure, from its change in per cent of A's figure signed so
    that positive is better (`gain`), and the interval of that gain."""
    if gain_pct is None:
        return "no figure"
    if gain_ci is None:
        if gain_pct < -margin:
            return "worse beyond margin, one reading (not counted)"
        return "better, one reading" if gain_pct > margin else "within margin, one reading"
    lo, hi = gain_ci
    if hi < -margin:
        return "regression"
    if gain_pct < -margin:
        return "worse, inconclusive (interval reaches inside the margin)"
    if lo > 0:
        return "better"
    return "within margin" if hi >= 0 else "worse, within margin"


def compare_measure(ma: Measure, mb: Measure, margin: float) -> dict[str, Any]:
    a, b = ma.figure, mb.figure
    out: dict[str, Any] = {
        "unit": ma.unit,
        "better": ma.better,
        "a": a,
        "b": b,
        "n": [ma.n, mb.n],
        "delta": None,
        "delta_pct": None,
        "ci95": None,
        "ci95_pct": None,
    }
    if a is None or b is None:
        out["verdict"] = "no figure"
        out["why"] = "measured in " + (
            "neither run" if a is None and b is None else ("A only" if b is None else "B only")
        )
        return out
    ci: tuple[float, float] | None
    if ma.counts is not None and mb.counts is not None:
        ci = newcombe(ma.counts, mb.counts)
        out["counts"] = [list(ma.counts), list(mb.counts)]
    else:
        ci = bootstrap_delta_ci(mb.values, ma.values)
    delta = b - a
    out["delta"] = delta
    out["ci95"] = list(ci) if ci else None
    sign = 1.0 if ma.better == "higher" else -1.0
    if a == 0:
        out["verdict"] = "within margin" if delta == 0 else "no per cent (A is 0)"
        return out
    pct = 100.0 * delta / abs(a)
    out["delta_pct"] = pct
    pct_ci = (100.0 * ci[0] / abs(a), 100.0 * ci[1] / abs(a)) if ci else None
    out["ci95_pct"] = list(pct_ci) if pct_ci else None
    gain_ci = None
    if pct_ci:
        lo, hi = sign * pct_ci[0], sign * pct_ci[1]
        gain_ci = (min(lo, hi), max(lo, hi))
    out["verdict"] = judge(sign * pct, gain_ci, margin)
    return out


def _setting_diff(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    return [
        f"{k} {a.get(k)!r} -> {b.get(k)!r}" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)
    ]


def compare_figures(
    da: Mapping[str, StageRecord],
    db: Mapping[str, StageRecord],
    margin: float,
    run_reasons: list[str],
) -> list[dict[str, Any]]:
    """One entry per cell of either run: compared per measure, or `not comparable` with why."""
    ca, cb = cells_of(da), cells_of(db)
    out: list[dict[str, Any]] = []
    order = list(ca) + [k for k in cb if k not in ca]
    for key in order:
        x, y = ca.get(key), cb.get(key)
        group, cell = key
        entry: dict[str, Any] = {"group": group, "cell": cell, "comparable": False}
        if x is None or y is None:
            only = x or y
            assert only is not None
            side, missing = ("A", "B") if y is None else ("B", "A")
            ran = only.stage in (db if y is None else da)
            entry["why"] = f"measured only in {side}" + (
                "" if ran else f": the {only.stage} stage did not run in {missing}"
            )
        elif run_reasons:
            entry["why"] = "; ".join(run_reasons)
        elif diff := _setting_diff(x.setting, y.setting):
            entry["why"] = "measured under another setting: " + "; ".join(diff)
        else:
            entry["comparable"] = True
            entry["measures"] = {
                name: compare_measure(m, y.measures[name], margin)
                for name, m in x.measures.items()
                if name in y.measures
            }
            for name in set(x.measures) ^ set(y.measures):
                entry.setdefault("not_measured", []).append(name)
        out.append(entry)
    return out
