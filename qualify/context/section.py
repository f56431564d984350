"""The context stage in the decision document: cold and warm side by side per rung (cached
tokens, the clamp, prefill n/a where the prompt was cached), and the ladder plot (TTFT and
decode against prompt tokens, the needles found and missed at their depth). A pure function of
the stage's record (`data`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from qualify.decision.plots import Panel, Plot, num
from qualify.decision.record import GateOutcome
from qualify.decision.sections import as_dict as _dict
from qualify.decision.sections import as_list as _list
from qualify.evidence.store import RunDir

_d, _l, _num = _dict, _list, num


def section(data: dict[str, Any], gates: list[GateOutcome]) -> dict[str, Any]:
    """What the template's Context section shows."""
    return {"context": context_rows(data)}


def plots(run: RunDir, data: dict[str, Any], here: Path | None) -> list[Plot]:
    return [ladder(data)]


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


def ladder(context: dict[str, Any]) -> Plot:
    """TTFT and decode against actual prompt tokens, cold and warm apart; the needles found
    (o) and missed (x) at their depth, per pass."""
    ttft, decode = Panel("TTFT (s)"), Panel("decode (tok/s)")
    needles = Panel("needle depth (%)", scatter=True)
    for r in (_d(x) for x in _l(context.get("rows"))):
        x = _num(r.get("actual_prompt_tokens"))
        if x is None:
            continue
        for panel, key in ((ttft, "ttft_s"), (decode, "decode_tok_s")):
            y = _num(r.get(key))
            if y is not None:
                panel.series.setdefault(str(r.get("pass")), []).append((x, y))
        for depth, ok in sorted(_d(r.get("needles")).items()):
            d = _num(float(depth)) if str(depth).replace(".", "", 1).isdigit() else None
            if d is None:
                continue
            label = f"{r.get('pass')} {'found' if ok else 'missed'}"
            needles.series.setdefault(label, []).append((x, d))
            needles.markers[label] = "o" if r.get("pass") == "cold" else "^"
            needles.colors[label] = "tab:green" if ok else "tab:red"
    for p in (ttft, decode, needles):
        p.series = {k: sorted(v) for k, v in sorted(p.series.items())}
    panels = [ttft, decode] + ([needles] if needles.series else [])
    return Plot("context-ladder.png", "Context ladder", "prompt tokens", panels)
