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
    """Gates of a levelled stage: one column per reasoning level, one summary line per level."""
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
        passed = [g.gate for g in here if g.verdict is Verdict.PASS]
        other = [
            f"{g.gate} {shown(g)} ({'; '.join(g.reasons) or 'no reason'})"
            for g in here
            if g.verdict is not Verdict.PASS
        ]
        text = (", ".join(passed) + " passed") if passed else "nothing passed"
        summary.append({"level": lv, "text": text + ("; " + "; ".join(other) if other else "")})
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
        out["reasons"] = "; ".join(str(x) for x in _list(r.get("reasons")))
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
