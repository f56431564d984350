"""Per figure, the delta from run A to run B where both measured the same cell, with its interval.

Each stage's typed record is read into cells: a cell is what was measured under one setting (a
capacity length x concurrency, a context rung x pass x content, the A/B prompt set, a card in a
stage), and holds measures: per-run values (the figure is their median; the interval is the seeded
bootstrap of the difference of medians, `qualify.ab.stats.bootstrap_delta_ci`, resampling runs)
or counts (a rate of successes over trials; the interval is Newcombe's hybrid score interval of
the difference of two proportions, from Wilson intervals). A draft acceptance rate's trials are
its requests, not its tokens: the tokens of one answer are accepted or refused together, so two
runs whose answers differ differ in acceptance far beyond a per-token interval.

A cell is compared only when both runs measured it under the same setting, on the same engine
and hardware; otherwise it is `not comparable`, with why. A compared figure is a regression when
its whole 95% interval lies worse than the house's margin (`ab_max_regression_pct`, in per cent of
A's figure); one reading per run has no interval and is never counted, only shown.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from statistics import NormalDist
from typing import NotRequired, TypedDict

from qualify.ab.stats import bootstrap_delta_ci
from qualify.diff.gates import changes
from qualify.present.cells import Cell, Measure
from qualify.records import StageRecord

Z95 = NormalDist().inv_cdf(0.975)


# --- intervals -------------------------------------------------------------------------------


def newcombe(a: tuple[float, float], b: tuple[float, float]) -> tuple[float, float] | None:
    """95% interval of p_b - p_a (Newcombe's hybrid score method, from the Wilson score interval
    of each proportion); None without trials."""
    if a[1] <= 0 or b[1] <= 0:
        return None
    wilson = []  # (p, low, high) of each proportion
    for s, n in (a, b):
        p, den = s / n, 1 + Z95 * Z95 / n
        mid = (p + Z95 * Z95 / (2 * n)) / den
        half = Z95 * math.sqrt(p * (1 - p) / n + Z95 * Z95 / (4 * n * n)) / den
        wilson.append((p, max(0.0, mid - half), min(1.0, mid + half)))
    (pa, la, ua), (pb, lb, ub) = wilson
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


class MeasureDiff(TypedDict):
    """One measure of a cell in both runs: the figures, the delta and its interval, a verdict."""

    unit: str
    better: str
    a: float | None
    b: float | None
    n: list[int]
    delta: float | None
    delta_pct: float | None
    ci95: list[float] | None
    ci95_pct: list[float] | None
    verdict: NotRequired[str]  # always set; after the figures, in the JSON's order
    why: NotRequired[str]
    counts: NotRequired[list[list[int]]]
    units: NotRequired[list[int | None]]


class FigureDiff(TypedDict):
    """A cell of either run: its measures compared, or why it is not comparable."""

    group: str
    cell: str
    comparable: bool
    why: NotRequired[str]
    measures: NotRequired[dict[str, MeasureDiff]]
    not_measured: NotRequired[list[str]]


def compare_measure(ma: Measure, mb: Measure, margin: float) -> MeasureDiff:
    a, b = ma.figure, mb.figure
    out: MeasureDiff = {
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
    if (ta := ma.trials) is not None and (tb := mb.trials) is not None:
        ci = newcombe(ta, tb)
        out["counts"] = [list(ma.counts or ()), list(mb.counts or ())]
        if ma.units is not None or mb.units is not None:
            out["units"] = [ma.units, mb.units]
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


def compare_figures(
    da: Mapping[str, StageRecord],
    db: Mapping[str, StageRecord],
    margin: float,
    run_reasons: list[str],
) -> list[FigureDiff]:
    """One entry per cell of either run: compared per measure, or `not comparable` with why.
    A run's cells are every stage's (its spec's `cells`, handed its typed record), the `lead`
    stage's first."""
    from qualify.registry import led

    ca: dict[tuple[str, str], Cell] = {}
    cb: dict[tuple[str, str], Cell] = {}
    for records, cells in ((da, ca), (db, cb)):
        for spec in led():
            record = records.get(spec.name)
            if spec.loaded.cells is not None and record is not None:
                for c in spec.loaded.cells(record):
                    cells[c.group, c.cell] = dataclasses.replace(c, stage=spec.name)
    out: list[FigureDiff] = []
    order = list(ca) + [k for k in cb if k not in ca]
    for key in order:
        x, y = ca.get(key), cb.get(key)
        group, cell = key
        entry: FigureDiff = {"group": group, "cell": cell, "comparable": False}
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
        elif diff := changes(x.setting, y.setting):
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
