"""Each section of the decision document as plain rows, built from a stage's `data` alone.

The shapes are those of `docs/evidence-contract.md`. A value the evidence does not hold is
None and is printed as "no data"; it is never replaced by zero.
"""

from __future__ import annotations

from typing import Any

from qualify.decision.record import GateOutcome
from qualify.records import Verdict

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
    for name in names:
        row = [shown(cells[(name, lv)]) if (name, lv) in cells else "absent" for lv in levels]
        rows.append({"gate": name, "cells": row})
    summary = []
    for lv in levels:
        here = [g for g in mine if (g.level or "default") == lv]
        passed = sum(g.verdict is Verdict.PASS for g in here)
        other = [g.gate for g in here if g.verdict is not Verdict.PASS]
        text = f"{passed}/{len(here)} passed"
        summary.append({"level": lv, "text": text, "other": other})
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
    return {
        "cold": [norm(r) for r in rows if r.get("pass") == "cold"],
        "warm": [norm(r) for r in rows if r.get("pass") == "warm"],
        "clamped": clamped,
    }


def ab_rows(data: dict[str, Any]) -> dict[str, Any]:
    lanes = _dict(data.get("lanes"))
    names = {k: _dict(lanes.get(k)).get("name") or k for k in ("candidate", "control")}
    metrics = []
    for m in (_dict(x) for x in _list(data.get("metrics"))):
        metrics.append(
            {
                "label": METRIC_LABELS.get(str(m.get("metric")), str(m.get("metric"))),
                "unit": str(m.get("unit") or ""),
                "better": m.get("better"),
                "candidate": m.get("candidate"),
                "control": m.get("control"),
                "delta_pct": m.get("delta_pct"),
                "within_noise": bool(m.get("within_noise")),
                "interval": interval(m),
            }
        )
    excluded = [_dict(x) for x in _list(data.get("excluded"))]
    return {
        "names": names,
        "variable": _dict(lanes.get("control")).get("variable"),
        "runs": data.get("runs"),
        "metrics": metrics,
        "acceptance_text": acceptance_text(data.get("acceptance")),
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
    return {
        "source": data.get("source"),
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


def acceptance_text(acc: Any) -> str:
    """Draft acceptance from the server's counters, or why there is none."""
    if not isinstance(acc, dict):
        return "no acceptance counters were recorded."
    accepted, drafted = acc.get("accepted"), acc.get("draft_tokens")
    if isinstance(accepted, int) and isinstance(drafted, int) and drafted > 0:
        rate = f"{100 * accepted / drafted:.1f}%"
        text = f"{accepted:,} accepted of {drafted:,} drafted tokens: {rate} acceptance"
    else:
        text = "no drafted tokens were counted"
    if isinstance(acc.get("mean_length"), int | float):
        text += f", {acc['mean_length']:.2f} accepted tokens per draft"
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
            }
        )
    return out


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
            "visible": b.get("visible_tokens"),
            "reasoning": b.get("reasoning_tokens"),
            "max_tokens": b.get("max_tokens"),
        }
        for b in (_dict(x) for x in _list(data.get("budgets")))
    ]
    return {
        "lines": [str(x) for x in _list(data.get("lines"))],
        "scope": data.get("scope"),
        "rows": rows,
        "budgets": budgets,
        "budget_scale": data.get("budget_scale"),
        "failing": list(failing.values()),
    }


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
)


def capacity(data: dict[str, Any]) -> dict[str, Any]:
    """The matrix, per-kind decode, the engine's own capacity and the incumbent."""
    matrix = [_dict(r) for r in _list(data.get("matrix"))]
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
        for k in (_dict(x) for x in _list(data.get("kinds")))
    ]
    eng = _dict(data.get("engine"))
    inc = _dict(data.get("incumbent"))
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
        "kinds": kinds,
        "engine": {
            "kv_tokens": eng.get("kv_tokens"),
            "concurrency": eng.get("max_concurrency") or eng.get("concurrency_at_full_context"),
        },
        "incumbent": {
            "status": inc.get("status") or "not recorded",
            "why": inc.get("why"),
            "candidate": inc.get("candidate"),
        },
        "best": best,
        "not_run": [_dict(x) for x in _list(data.get("not_run"))],
    }


def fidelity(data: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Per timed stage: how far the client's timings are from the server's own."""
    out = []
    for stage in ("context", "ab", "capacity"):
        f = _dict(_dict(data.get(stage)).get("fidelity"))
        if not f:
            continue
        lanes = _dict(f.get("lanes"))
        chunk = [
            float(e)
            for v in lanes.values()
            if isinstance(e := _dict(v).get("chunk_counting_error_pct"), int | float)
        ]
        out.append(
            {
                "stage": stage,
                "n": f.get("n"),
                "decode_ratio": f.get("decode_ratio_median"),
                "ttft_gap_ms": f.get("ttft_minus_server_prompt_ms_median"),
                "chunk_error_pct": max(chunk) if chunk else None,
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
