"""Per figure, the delta from run A to run B where both measured the same cell, with its interval.

Each stage's data is read into cells: a cell is what was measured under one setting (a capacity
length x concurrency, a context rung x pass x content, the A/B prompt set, a card in a stage),
and holds measures: per-run values (the figure is their median; the interval is the seeded
bootstrap of the difference of medians, `qualify.ab.stats.bootstrap_delta_ci`, resampling runs)
or counts (a rate of successes over trials; the interval is Newcombe's hybrid score interval of
the difference of two proportions, from Wilson intervals).

A cell is compared only when both runs measured it under the same setting, on the same engine
and hardware; otherwise it is `not comparable`, with why. A compared figure is a regression when
its whole 95% interval lies worse than the house's margin (`ab_max_regression_pct`, in per cent of
A's figure); one reading per run has no interval and is never counted, only shown.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any

from qualify.ab.stats import bootstrap_delta_ci
from qualify.httpclient.timing import median

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


def _nums(xs: Any) -> list[float]:
    return [float(x) for x in xs or [] if isinstance(x, int | float) and not isinstance(x, bool)]


def _d(x: Any) -> dict[str, Any]:
    return x if isinstance(x, dict) else {}


def _l(x: Any) -> list[Any]:
    return x if isinstance(x, list) else []


def _digest(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()[:12]


# --- extraction, one function per stage ------------------------------------------------------


def ab_cells(data: dict[str, Any]) -> list[Cell]:
    """The candidate lane over the A/B prompt set: per-run p50s, and draft acceptance."""
    s = _d(data.get("settings"))
    prompts = [
        f"{p.get('id')}:{p.get('kind')}" for p in _l(data.get("prompts")) if isinstance(p, dict)
    ]
    setting = {
        "prompts": _digest(prompts),
        **{k: s.get(k) for k in ("max_tokens", "temperature", "concurrency", "level", "nonce")},
    }
    runs = _l(_d(_d(data.get("lanes")).get("candidate")).get("runs"))
    cell = Cell("ab", "candidate lane", setting)
    for name, unit, better in (
        ("decode_tok_s", "tok/s", "higher"),
        ("ttft_s", "s", "lower"),
        ("e2e_s", "s", "lower"),
    ):
        cell.measures[name] = Measure(unit, better, _nums(_d(r.get("p50")).get(name) for r in runs))
    agg = _nums(r.get("aggregate_output_tok_s") for r in runs)
    if agg:
        cell.measures["aggregate_output_tok_s"] = Measure("tok/s", "higher", agg)
    out = [cell]
    acc = _d(data.get("acceptance"))
    acc = _d(acc.get("candidate")) or acc
    if isinstance(acc.get("draft_tokens"), int) and acc["draft_tokens"] > 0:
        a = Cell("acceptance", "ab candidate lane", setting)
        a.measures["acceptance"] = Measure(
            "rate", "higher", counts=(int(acc.get("accepted") or 0), int(acc["draft_tokens"]))
        )
        drafts = int(acc.get("drafts") or 0)
        for i, k in enumerate(_l(acc.get("accepted_per_position"))):
            if drafts and isinstance(k, int):
                a.measures[f"position {i}"] = Measure("rate", "higher", counts=(k, drafts))
        out.append(a)
    return out


def _capacity_runs(entry: dict[str, Any], key: str) -> list[float]:
    """One value per counted run of a cell (the excluded runs left out)."""
    return _nums(r.get(key) for r in _l(entry.get("run_records")) if not r.get("excluded"))


def capacity_cells(data: dict[str, Any]) -> list[Cell]:
    """The candidate's matrix cells and content kinds: per-run decode, aggregate, TTFT, E2E."""
    s = _d(data.get("settings"))
    base = {k: s.get(k) for k in ("max_tokens", "ignore_eos", "level")}
    out: list[Cell] = []
    for e in _l(data.get("matrix")):
        if not isinstance(e, dict) or e.get("lane", "candidate") != "candidate":
            continue
        c = Cell("capacity", str(e.get("cell")), {**base, "concurrency": e.get("concurrency")})
        c.setting["length"] = e.get("length")
        rv = _d(e.get("run_values"))
        c.measures["decode_tok_s_p50"] = Measure(
            "tok/s", "higher", _nums(rv.get("decode_tok_s_p50"))
        )
        c.measures["aggregate_output_tok_s"] = Measure(
            "tok/s", "higher", _nums(rv.get("aggregate_output_tok_s"))
        )
        c.measures["ttft_p50_s"] = Measure("s", "lower", _capacity_runs(e, "ttft_p50_s"))
        c.measures["e2e_p50_s"] = Measure("s", "lower", _capacity_runs(e, "e2e_p50_s"))
        out.append(c)
    for k in _l(data.get("kinds")):
        if not isinstance(k, dict):
            continue
        name = f"{k.get('kind')}@{k.get('depth')}"
        rv = _d(k.get("run_values"))
        c = Cell("capacity kinds", name, {**base, "kind": k.get("kind"), "depth": k.get("depth")})
        c.measures["decode_tok_s_p50"] = Measure(
            "tok/s", "higher", _nums(rv.get("decode_tok_s_p50"))
        )
        c.measures["aggregate_output_tok_s"] = Measure(
            "tok/s", "higher", _nums(rv.get("aggregate_output_tok_s"))
        )
        out.append(c)
        acc = _d(k.get("acceptance"))
        if isinstance(acc.get("draft_tokens"), int) and acc["draft_tokens"] > 0:
            a = Cell("acceptance", f"kind {name}", c.setting)
            a.measures["acceptance"] = Measure(
                "rate", "higher", counts=(int(acc.get("accepted") or 0), int(acc["draft_tokens"]))
            )
            out.append(a)
    return out


def context_cells(data: dict[str, Any]) -> list[Cell]:
    """Per rung (the size run), pass, content and concurrency: every counted stream's figures;
    per rung and task kind, the audit's checks passed (`audits`, when the stage ran them)."""
    level = data.get("level")
    out: list[Cell] = []
    for row in _l(data.get("rows")):
        if not isinstance(row, dict) or row.get("verdict") == "error":
            continue
        key = (
            f"{row.get('planned_tokens')} {row.get('pass')} {row.get('content')} "
            f"c={row.get('concurrency')}"
        )
        setting = {
            "planned_tokens": row.get("planned_tokens"),
            "pass": row.get("pass"),
            "content": row.get("content"),
            "concurrency": row.get("concurrency"),
            "level": level,
        }
        streams = [
            s for s in _l(row.get("streams")) if isinstance(s, dict) and not s.get("problem")
        ]
        speedy = [s for s in streams if not s.get("degenerate")]
        c = Cell("context", key, setting)
        c.measures["ttfo_s"] = Measure("s", "lower", _nums(s.get("ttfo_s") for s in streams))
        c.measures["effective_prefill_tok_s"] = Measure(
            "tok/s", "higher", _nums(s.get("effective_prefill_tok_s") for s in streams)
        )
        c.measures["decode_tok_s"] = Measure(
            "tok/s", "higher", _nums(s.get("decode_tok_s") for s in speedy)
        )
        needles = [all(_d(s.get("needles")).values()) for s in streams if s.get("needles")]
        if needles:
            c.measures["needles found"] = Measure(
                "rate", "higher", counts=(sum(needles), len(needles))
            )
        out.append(c)
    tasks: dict[str, Cell] = {}
    for a in _l(_d(data.get("audits")).get("by_kind")):
        if not isinstance(a, dict):
            continue
        key = f"{a.get('planned_tokens')} {a.get('pass')} {a.get('content')} ({a.get('form')})"
        setting = {k: a.get(k) for k in ("planned_tokens", "pass", "content", "form")}
        # The depths are not matched: aggregation's notes are placed at random per run.
        c = tasks.setdefault(key, Cell("context tasks", key, {**setting, "level": level}))
        c.measures[str(a.get("kind"))] = Measure(
            "rate", "higher", counts=(int(a.get("passed") or 0), int(a.get("asked") or 0))
        )
    out.extend(tasks.values())
    return out


def vram_cells(data: dict[str, Any]) -> list[Cell]:
    """Per card and stage: the lowest free memory seen (one reading per run)."""
    out: list[Cell] = []
    for card in _l(data.get("cards")):
        if not isinstance(card, dict):
            continue
        setting = {"name": card.get("name"), "total_mib": card.get("total_mib")}
        for stage, s in sorted(_d(card.get("stages")).items()):
            c = Cell("vram", f"gpu {card.get('gpu')} {stage}", setting)
            c.measures["min_free_mib"] = Measure(
                "MiB", "higher", _nums([_d(s).get("min_free_mib")])
            )
            out.append(c)
    return out


EXTRACT = {
    "ab": ab_cells,
    "capacity": capacity_cells,
    "context": context_cells,
    "vram": vram_cells,
}


def cells_of(data: dict[str, dict[str, Any]]) -> dict[tuple[str, str], Cell]:
    out: dict[tuple[str, str], Cell] = {}
    for stage, fn in EXTRACT.items():
        if stage in data:
            for c in fn(data[stage]):
                c.stage = stage
                out[(c.group, c.cell)] = c
    return out


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
    da: dict[str, dict[str, Any]],
    db: dict[str, dict[str, Any]],
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
