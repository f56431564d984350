"""The quality stage in the decision document: task x lane@level with the budget as sent
beside the declared one, each failing cell linked to its attempt. A pure function of the
stage's record (`data`)."""

from __future__ import annotations

from typing import Any

from qualify.decision.record import GateOutcome
from qualify.decision.sections import as_dict as _dict
from qualify.decision.sections import as_list as _list


def section(data: dict[str, Any], gates: list[GateOutcome]) -> dict[str, Any]:
    """What the template's quality table shows."""
    return {"quality": quality(data)}


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
    budgets = [_budget(_dict(x)) for x in _list(data.get("budgets"))]
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


def _budget(b: dict[str, Any]) -> dict[str, Any]:
    """One task's budget as sent, with the declared one beside it where they differ."""
    return {
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
