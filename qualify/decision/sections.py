"""Each section of the decision document as plain rows, built from a stage's `data` alone.

The shapes are those of `docs/evidence-contract.md`. A value the evidence does not hold is
None and is printed as "no data"; it is never replaced by zero.
"""

from __future__ import annotations

from typing import Any

from qualify.ab.stats import paired_summary
from qualify.ab.table import pairs
from qualify.capacity.section import energy_text
from qualify.decision.record import GateOutcome
from qualify.records import Verdict
from qualify.registry import stage_names

PIN_LABELS = {
    "model": "Model",
    "revision": "Model revision",
    "engine": "Engine",
    "engine_build": "Engine build",
    "image_digest": "Image",
    "quantization": "Quantization",
    "kv_dtype": "KV cache",
    "parallelism": "Parallelism",
    "context_length": "Context length",
    "max_num_seqs": "Max concurrent sequences",
    "speculation": "Speculation",
}
METRIC_LABELS = {
    "decode_tok_s": "Per-request decode p50",
    "aggregate_output_tok_s": "Aggregate output",
    "ttfo_s": "TTFO p50",
    "ttft_s": "First-visible TTFT p50",
    "generation_s": "Generation p50",
    "e2e_s": "E2E p50",
}


def _dict(x: Any) -> dict[str, Any]:
    return x if isinstance(x, dict) else {}


def _list(x: Any) -> list[Any]:
    return x if isinstance(x, list) else []


def show(value: Any) -> str:
    """A pinned or reported value as one table cell."""
    if value is None or value == []:
        return "not reported"
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in value.items() if v not in (None, False, 0, ""))
    if isinstance(value, list):
        return ", ".join(dict.fromkeys(str(v) for v in value))
    return str(value)


def shown(g: GateOutcome) -> str:
    """A gate's verdict as the document prints it: a waived gate reads as waived, never pass."""
    return f"waived ({g.verdict.value})" if g.status == "waived" else g.verdict.value


def identity_rows(data: dict[str, Any], gates: list[GateOutcome]) -> list[dict[str, str]]:
    pins, reported = _dict(data.get("pins")), _dict(data.get("reported"))
    verdicts = {g.gate.removeprefix("pin@"): shown(g) for g in gates if g.stage == "identity"}
    rows = []
    for name, label in PIN_LABELS.items():
        if name not in pins:
            continue
        rows.append(
            {
                "label": label,
                "pinned": "not pinned" if pins[name] is None else show(pins[name]) or "none",
                "reported": show(reported.get(name)),
                "verdict": verdicts.get(name, "not checked"),
            }
        )
    return rows


def functional(gates: list[GateOutcome], stage: str = "preflight") -> dict[str, Any]:
    """Gates of a levelled stage: one column per reasoning level, one totals line per level.
    Reasons are not repeated here: a failing gate is named by its key, its reason is written
    once among the blocking reasons (or the caveats, when advisory)."""
    mine = [g for g in gates if g.stage == stage]
    levels = list(dict.fromkeys(g.level or "default" for g in mine))
    names = list(dict.fromkeys(g.gate for g in mine))
    cells = {(g.gate, g.level or "default"): g for g in mine}
    rows = []
    passing = []
    for name in names:
        row = [shown(cells[(name, lv)]) if (name, lv) in cells else "absent" for lv in levels]
        if len(names) > 6 and all(c == "pass" for c in row):
            passing.append(name)
            continue
        rows.append({"gate": name, "cells": row})
    if passing:
        rows.append({"gate": ", ".join(passing), "cells": ["pass"] * len(levels)})
    summary = []
    for lv in levels:
        here = [g for g in mine if (g.level or "default") == lv]
        passed = sum(g.verdict is Verdict.PASS for g in here)
        other = [g.gate for g in here if g.verdict is not Verdict.PASS]
        text = f"{passed}/{len(here)} passed"
        summary.append(
            {"level": lv, "text": text, "other": other, "passed": passed, "n": len(here)}
        )
    return {"levels": levels, "rows": rows, "summary": summary}


def context_rows(data: dict[str, Any]) -> dict[str, Any]:
    """Context rows split by pass: cold and warm are never blended."""
    rows = [_dict(r) for r in _list(data.get("rows"))]
    keys = (
        *("target", "content", "concurrency", "planned_tokens", "actual_prompt_tokens"),
        *("cached_tokens", "ttfo_s", "ttft_s", "effective_prefill_tok_s", "decode_tok_s"),
        *("generation_s", "e2e_s", "itl_p50_ms", "itl_p95_ms", "completion_tokens", "verdict"),
    )

    def norm(r: dict[str, Any]) -> dict[str, Any]:
        out = {k: r.get(k) for k in keys}
        needles = _dict(r.get("needles"))
        out["needles"] = ", ".join(
            f"{d}% {'found' if ok else 'missed'}" for d, ok in sorted(needles.items())
        )
        return out

    clamped = [_dict(t) for t in _list(data.get("targets")) if _dict(t).get("clamped") is True]
    planned = {
        _dict(t).get("target"): _dict(t).get("planned_tokens")
        for t in _list(data.get("targets"))
        if _dict(t).get("clamped") is True
    }
    side: dict[tuple[Any, Any, Any], dict[str, Any]] = {}
    for r in rows:
        k = (r.get("target"), r.get("content"), r.get("concurrency"))
        named = next((t for t, p in planned.items() if p == r.get("target")), None)
        item = side.setdefault(
            k,
            {
                "target": named if named is not None else r.get("target"),
                "clamped_to": r.get("target")
                if named is not None
                else planned.get(r.get("target")),
                "content": r.get("content"),
                "concurrency": r.get("concurrency"),
                "cold": None,
                "warm": None,
            },
        )
        if r.get("pass") in ("cold", "warm"):
            item[str(r["pass"])] = norm(r) | {"prefill_note": prefill_note(r)}
    return {
        "cold": [norm(r) for r in rows if r.get("pass") == "cold"],
        "warm": [norm(r) for r in rows if r.get("pass") == "warm"],
        "side": list(side.values()),
        "clamped": clamped,
    }


def prefill_note(r: dict[str, Any]) -> str | None:
    """Why a row's effective prefill is no prefill figure: most of its prompt was cached, so
    prompt tokens over TTFO counts tokens the server never processed."""
    prompt, cached = r.get("actual_prompt_tokens"), r.get("cached_tokens")
    if (
        isinstance(prompt, int | float)
        and isinstance(cached, int | float)
        and prompt > 0
        and cached >= prompt / 2
    ):
        return f"n/a ({100 * cached / prompt:.0f}% cached)"
    return None


def runs_of(m: dict[str, Any]) -> str:
    """How many run-level values a lane figure is the median of, in words."""
    runs = _dict(m.get("runs"))
    a, b = runs.get("candidate"), runs.get("control")
    if a is None and b is None:
        return "run-level values (count not recorded)"
    n = f"{a}" if a == b else f"{a} / {b}"
    return f"{n} run-level value{'s' if a != 1 or b != 1 else ''}"


def paired(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per metric, the paired per-request summary: as the A/B stage recorded it, or computed
    now from the per-request timings it kept (older evidence), by the same function."""
    lanes = _dict(data.get("lanes"))
    cand = [_dict(r) for r in _list(_dict(lanes.get("candidate")).get("runs"))]
    ctrl = [_dict(r) for r in _list(_dict(lanes.get("control")).get("runs"))]
    settings = _dict(data.get("settings"))
    resamples = int(settings.get("bootstrap_resamples") or 2000)
    seed = int(settings.get("seed") or 0)
    out = {}
    for i, m in enumerate(_dict(x) for x in _list(data.get("metrics"))):
        name = str(m.get("metric"))
        if isinstance(m.get("paired"), dict):
            out[name] = _dict(m["paired"])
        elif cand and ctrl:
            out[name] = paired_summary(pairs(cand, ctrl, name), resamples, seed + i)
    return out


def paired_text(p: dict[str, Any] | None) -> str:
    """A paired summary in a few words: the median difference with its interval and sample
    sizes, or "too few samples" (inconclusive) when the interval says nothing."""
    if not p:
        return "no per-request pairs recorded"
    pn, kn = p.get("pairs"), p.get("prompts")
    n = f"{pn} pair{'' if pn == 1 else 's'} over {kn} prompt{'' if kn == 1 else 's'}"
    med, ci = p.get("median_pct"), p.get("ci95_pct")
    if p.get("too_few") or med is None or ci is None:
        return f"too few samples ({n}): inconclusive"
    return f"{med:+.1f}% (95% interval {ci[0]:+.1f}% to {ci[1]:+.1f}%, {n})"


def ab_rows(data: dict[str, Any]) -> dict[str, Any]:
    lanes = _dict(data.get("lanes"))
    names = {k: _dict(lanes.get(k)).get("name") or k for k in ("candidate", "control")}
    per = paired(data)
    metrics = []
    for m in (_dict(x) for x in _list(data.get("metrics"))):
        p = per.get(str(m.get("metric")))
        metrics.append(
            {
                "label": METRIC_LABELS.get(str(m.get("metric")), str(m.get("metric"))),
                "unit": str(m.get("unit") or ""),
                "better": m.get("better"),
                "candidate": m.get("candidate"),
                "control": m.get("control"),
                "delta_pct": m.get("delta_pct"),
                "within_noise": bool(m.get("within_noise")),
                "runs": runs_of(m),
                "paired": paired_text(p),
            }
        )
    excluded = [_dict(x) for x in _list(data.get("excluded"))]
    first = next(iter(per.values()), None)
    return {
        "names": names,
        "variable": _dict(lanes.get("control")).get("variable"),
        "runs": data.get("runs"),
        "pairs": first,
        "method": (first or {}).get("method") or "percentile bootstrap over prompts",
        "metrics": metrics,
        "acceptance_text": acceptance_text(data.get("acceptance"), data),
        "energy_why": ab_energy_why(data),
        "excluded": [
            {
                "lane": x.get("lane"),
                "run": x.get("run"),
                "prompt": x.get("prompt"),
                "why": x.get("why"),
            }
            for x in excluded
        ],
    }


def vram_rows(data: dict[str, Any]) -> dict[str, Any]:
    """Per stage, each card's minimum free memory and peak power, against the reserve."""
    reserve = data.get("reserve_gib")
    cards = [_dict(c) for c in _list(data.get("cards"))]
    stages = list(dict.fromkeys(s for c in cards for s in _dict(c.get("stages"))))
    rows = []
    for st in stages:
        cells, verdicts = [], []
        for c in cards:
            cell = _dict(_dict(c.get("stages")).get(st))
            free, power = cell.get("min_free_mib"), cell.get("peak_power_w")
            cells.append(
                {"min_free_mib": free, "peak_power_w": power, "samples": cell.get("samples")}
            )
            if free is None or not isinstance(reserve, int | float):
                verdicts.append("no data")
            else:
                verdicts.append("pass" if free >= reserve * 1024 else "fail")
        rows.append({"stage": st, "cells": cells, "reserve": _reserve_word(verdicts)})
    words = [r["reserve"] for r in rows]
    overall = (
        "pass on every card at every stage"
        if words and all(w == "pass on all" for w in words)
        else "fails: "
        + "; ".join(f"{r['stage']} {r['reserve']}" for r in rows if r["reserve"] != "pass on all")
        if words
        else "no data"
    )
    return {
        "source": data.get("source"),
        "overall": overall,
        "interval_ms": _dict(data.get("interval_ms")).get("target"),
        "reserve_gib": reserve,
        "cards": [
            {"label": f"GPU {c.get('gpu')}" + (f" ({c['name']})" if c.get("name") else "")}
            for c in cards
        ],
        "rows": rows,
    }


def _reserve_word(verdicts: list[str]) -> str:
    if not verdicts:
        return "no data"
    if all(v == "pass" for v in verdicts):
        return "pass on all"
    fails = verdicts.count("fail")
    if fails:
        return "fail on all" if fails == len(verdicts) else f"fail on {fails} of {len(verdicts)}"
    return "no data"


def accepted_per_draft(acc: dict[str, Any]) -> float | None:
    """Accepted draft tokens per draft (the bonus token not counted), from the counters."""
    accepted, drafts = acc.get("accepted"), acc.get("drafts")
    if isinstance(accepted, int | float) and isinstance(drafts, int | float) and drafts > 0:
        return float(accepted) / float(drafts)
    return None


def draft_share(data: dict[str, Any]) -> str | None:
    """How much of the candidate's timed output the drafts gave: what a high acceptance rate
    over few drafts is worth."""
    acc = _dict(data.get("acceptance"))
    accepted = acc.get("accepted")
    runs = _list(_dict(_dict(data.get("lanes")).get("candidate")).get("runs"))
    reqs = [_dict(q) for r in runs for q in _list(_dict(r).get("requests"))]
    counted = [q for q in reqs if not q.get("failed")]
    tokens = sum(int(q.get("completion_tokens") or 0) for q in counted)
    if not isinstance(accepted, int) or not tokens or not counted:
        return None
    return (
        f"{acc.get('drafts')} drafts in {len(counted)} timed requests: accepted drafts gave "
        f"{accepted:,} of {tokens:,} output tokens ({100 * accepted / tokens:.1f}%)"
    )


def acceptance_text(acc: Any, data: dict[str, Any] | None = None) -> str:
    """Draft acceptance from the server's counters, or why there is none."""
    if not isinstance(acc, dict):
        return "no acceptance counters were recorded."
    accepted, drafted = acc.get("accepted"), acc.get("draft_tokens")
    if isinstance(accepted, int) and isinstance(drafted, int) and drafted > 0:
        rate = f"{100 * accepted / drafted:.1f}%"
        text = f"{accepted:,} accepted of {drafted:,} drafted tokens: {rate} acceptance"
    else:
        text = "no drafted tokens were counted"
    per_draft = accepted_per_draft(acc)
    if per_draft is not None:
        text += f", {per_draft:.1f} accepted tokens per draft over {acc['drafts']:,} drafts"
        mean = acc.get("mean_length")
        if isinstance(mean, int | float) and abs(mean - per_draft - 1) < 0.01:
            text += f" ({mean:.1f} counting the bonus token)"
    elif isinstance(acc.get("mean_length"), int | float):
        text += f", mean acceptance length {acc['mean_length']:.2f} (server's figure)"
    share = draft_share(data or {}) if data else None
    if share:
        text += f"; {share}"
    per = [p for p in _list(acc.get("per_position")) if isinstance(p, int | float)]
    if per:
        shown = ", ".join(f"{p:.2f}" for p in per[:8])
        more = f" (first 8 of {len(per)} positions)" if len(per) > 8 else ""
        text += f"; per position {shown}{more}"
    return text + f" (source: {acc.get('source') or 'not recorded'})."


def ab_lanes(data: dict[str, Any]) -> list[dict[str, Any]]:
    """Per lane: name, speculation, KV tokens as the engine reported them, excluded requests."""
    out = []
    for key in ("candidate", "control"):
        lane = _dict(_dict(data.get("lanes")).get(key))
        if not lane:
            continue
        kv = _dict(lane.get("kv"))
        out.append(
            {
                "lane": key,
                "name": lane.get("name") or key,
                "speculation": show(_dict(lane.get("speculation"))) or "none",
                "kv": kv_text(kv),
                "runs": len(_list(lane.get("runs"))),
                "energy": energy_text(_dict(lane.get("energy"))),
            }
        )
    return out


def ab_energy_why(data: dict[str, Any]) -> str | None:
    """Why a lane's energy per output token is unmeasured (said once for both lanes)."""
    lanes = [_dict(_dict(data.get("lanes")).get(k)) for k in ("candidate", "control")]
    unmeasured = [_dict(x.get("energy")) for x in lanes if x]
    unmeasured = [e for e in unmeasured if energy_text(e) == "unmeasured"]
    if not unmeasured:
        return None
    why = next((str(e["why"]) for e in unmeasured if e.get("why")), None)
    return "this A/B recorded no energy" if why is None else why.removeprefix("unmeasured: ")


def kv_text(kv: dict[str, Any]) -> str:
    """The KV capacity a lane's engine reported, in a few words."""
    if not kv:
        return "not reported"
    for src in (_dict(kv.get("gauges")), _dict(kv.get("log")), kv):
        tokens = src.get("kv_tokens") or src.get("tokens")
        if isinstance(tokens, int | float):
            return f"{tokens:,.0f} tokens"
        slots, per = src.get("n_slots"), src.get("n_ctx_slot")
        if isinstance(slots, int) and isinstance(per, int):
            return f"{slots * per:,} tokens ({slots} slots x {per:,})"
    return "not reported"


def interval(m: dict[str, Any]) -> str:
    """The 95% interval of a delta, in the metric's unit, or why there is none."""
    ci = _list(m.get("ci95"))
    if len(ci) != 2 or not all(isinstance(x, int | float) for x in ci):
        return "none"
    unit = str(m.get("unit") or "")
    if unit == "s":
        return f"{ci[0] * 1000:+,.0f} to {ci[1] * 1000:+,.0f} ms"
    return f"{ci[0]:+,.1f} to {ci[1]:+,.1f} {unit}".rstrip()


def quality(data: dict[str, Any]) -> dict[str, Any]:
    """Totals lines, tasks x attempts, budgets, scope and the failing attempts' evidence."""
    rows = []
    for r in (_dict(x) for x in _list(data.get("table"))):
        att = [str(a) for a in _list(r.get("attempts"))]
        rows.append(
            {
                "task": r.get("task"),
                "lane": r.get("lane") or "candidate",
                "level": r.get("level") or "default",
                "attempts": ", ".join(att) or "not run",
                "passed": f"{att.count('pass')}/{len(att)}",
            }
        )
    failing: dict[tuple[str, str, str], dict[str, Any]] = {}
    for f in (_dict(x) for x in _list(data.get("failures"))):
        k = (str(f.get("task")), str(f.get("lane") or "candidate"), str(f.get("level")))
        item = failing.setdefault(
            k, {"task": k[0], "lane": k[1], "level": k[2], "outcomes": [], "file": None}
        )
        item["outcomes"].append(f"{f.get('attempt')} {f.get('outcome')}")
        files = [str(x) for x in _list(f.get("evidence"))]
        if files and item["file"] is None:
            item["file"] = files[0]
    budgets = [
        {
            "task": b.get("task"),
            "visible": b.get("visible_budget", b.get("visible_tokens")),
            "reasoning": b.get("reasoning_budget", b.get("reasoning_tokens")),
            "max_tokens": b.get("max_tokens"),
            "declared": (
                f"{b['visible_tokens']:,} / {b['reasoning_tokens']:,}"
                if "visible_budget" in b
                and isinstance(b.get("visible_tokens"), int)
                and isinstance(b.get("reasoning_tokens"), int)
                and (b["visible_tokens"], b["reasoning_tokens"])
                != (b.get("visible_budget"), b.get("reasoning_budget"))
                else None
            ),
        }
        for b in (_dict(x) for x in _list(data.get("budgets")))
    ]
    columns = list(dict.fromkeys((r["lane"], r["level"]) for r in rows))
    by = {(r["task"], r["lane"], r["level"]): r for r in rows}
    grid = []
    for task in dict.fromkeys(r["task"] for r in rows):
        b = next((x for x in budgets if x["task"] == task), None)
        cells = []
        for lane, level in columns:
            got = by.get((task, lane, level))
            if got is None:
                cells.append({"text": "not run", "file": None})
                continue
            att = [a.strip() for a in str(got["attempts"]).split(",") if a.strip()]
            bad = {a: att.count(a) for a in dict.fromkeys(att) if a != "pass"}
            more = ", ".join(f"{n} {a}" for a, n in bad.items())
            fail = failing.get((str(task), str(lane), str(level)))
            cells.append(
                {
                    "text": str(got["passed"]) + (f" ({more})" if more else ""),
                    "file": fail["file"] if fail else None,
                }
            )
        grid.append({"task": task, "cells": cells, "budget": b})
    return {
        "lines": [str(x) for x in _list(data.get("lines"))],
        "scope": data.get("scope"),
        "columns": [
            lane_level if lane_level[0] != "candidate" else ("", lane_level[1])
            for lane_level in columns
        ],
        "grid": grid,
        "rows": rows,
        "budgets": budgets,
        "budget_scale": data.get("budget_scale"),
        "failing": list(failing.values()),
    }


def fidelity(
    data: dict[str, dict[str, Any]], gates: list[GateOutcome] | None = None
) -> list[dict[str, Any]]:
    """Per timed stage: how far the client's timings are from the server's own, the verdict of
    the stage's fidelity gates (both halves: decode and TTFT), and the chunk-counting error of
    the lane farthest from zero, sign kept."""
    out = []
    for stage in stage_names():  # the timed stages are the ones whose record has fidelity
        f = _dict(_dict(data.get(stage)).get("fidelity"))
        if not f:
            continue
        lanes = _dict(f.get("lanes"))
        chunk = {
            lane: float(e)
            for lane, v in lanes.items()
            if isinstance(e := _dict(v).get("chunk_counting_error_pct"), int | float)
        }
        worst_lane = max(chunk, key=lambda k: abs(chunk[k]), default=None)
        gaps = {
            lane: float(v)
            for lane, x in lanes.items()
            if isinstance(v := _dict(x).get("ttft_minus_server_prompt_ms_median"), int | float)
        }
        gap_lane = max(gaps, key=lambda k: gaps[k], default=None)
        mine = [g for g in gates or [] if g.stage == stage and "fidelity" in g.gate]
        bad = [g for g in mine if g.verdict is not Verdict.PASS]
        if not mine:
            verdict = "no gate"
        elif bad:
            verdict = ", ".join(f"`{g.key}` {g.verdict.value}" for g in bad)
        else:
            verdict = "pass"
        out.append(
            {
                "stage": stage,
                "n": f.get("n"),
                "decode_ratio": f.get("decode_ratio_median"),
                "ttft_gap_ms": gaps[gap_lane]
                if gap_lane
                else f.get("ttft_minus_server_prompt_ms_median"),
                "ttft_lane": gap_lane,
                "chunk_error_pct": chunk[worst_lane] if worst_lane else None,
                "chunk_lane": worst_lane,
                "verdict": verdict,
            }
        )
    return out


def card_minimums(data: dict[str, Any]) -> list[dict[str, Any]]:
    """Each card's lowest free memory over every stage, against the reserve."""
    reserve = data.get("reserve_gib")
    out = []
    for c in (_dict(x) for x in _list(data.get("cards"))):
        frees = [
            float(f)
            for v in _dict(c.get("stages")).values()
            if isinstance(f := _dict(v).get("min_free_mib"), int | float)
        ]
        low = min(frees) if frees else None
        ok = None if low is None or not isinstance(reserve, int | float) else low >= reserve * 1024
        out.append(
            {
                "gpu": c.get("gpu"),
                "name": c.get("name"),
                "min_free_mib": low,
                "verdict": "no data" if ok is None else ("pass" if ok else "fail"),
            }
        )
    return out
