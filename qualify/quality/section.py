"""The quality stage in the decision document: task x lane@level with the budget as sent
beside the declared one, each failing cell linked to its attempt. A pure function of the
stage's record."""

from __future__ import annotations

import re
from typing import TypedDict

from qualify.present.record import GateOutcome
from qualify.quality.record import Failure, Record, TaskBudget, TaskRow


class Row(TypedDict):
    task: str
    lane: str
    level: str
    attempts: str
    passed: str


class Failing(TypedDict):
    task: str
    lane: str
    level: str
    outcomes: list[str]
    file: str | None


class Budget(TypedDict):
    task: str
    visible: int
    reasoning: int
    max_tokens: int
    declared: str | None


class Cell(TypedDict):
    text: str
    file: str | None


class GridLine(TypedDict):
    task: str
    cells: list[Cell]
    budget: Budget | None


def section(record: Record | None, gates: list[GateOutcome]) -> dict[str, object]:
    """What the template's quality table shows: totals lines, tasks x attempts, budgets, scope
    and the failing attempts' evidence."""
    rows = [_row(r) for r in record.table] if record else []
    failing = _failing(record.failures) if record else {}
    budgets = [_budget(b) for b in record.budgets] if record else []
    columns = list(dict.fromkeys((r["lane"], r["level"]) for r in rows))
    quality = {
        "lines": list(record.lines) if record else [],
        "scope": record.scope if record else None,
        "columns": [(lane if lane != "candidate" else "", level) for lane, level in columns],
        "grid": _grid(rows, columns, budgets, failing),
        "rows": rows,
        "budgets": budgets,
        "budget_scale": record.budget_scale if record else None,
        "failing": list(failing.values()),
    }
    return {"quality": quality}


def _row(r: TaskRow) -> Row:
    att = [str(a) for a in r.attempts]
    return {
        "task": r.task,
        "lane": r.lane or "candidate",
        "level": r.level or "default",
        "attempts": ", ".join(att) or "not run",
        "passed": f"{att.count('pass')}/{len(att)}",
    }


def _failing(failures: list[Failure]) -> dict[tuple[str, str, str], Failing]:
    """The failing attempts per task, lane and level, with the first evidence file."""
    failing: dict[tuple[str, str, str], Failing] = {}
    for f in failures:
        k = (f.task, f.lane or "candidate", f.level)
        item = failing.setdefault(
            k, {"task": k[0], "lane": k[1], "level": k[2], "outcomes": [], "file": None}
        )
        item["outcomes"].append(f"{f.attempt} {f.outcome}")
        if f.evidence and item["file"] is None:
            item["file"] = f.evidence[0]
    return failing


def _grid(
    rows: list[Row],
    columns: list[tuple[str, str]],
    budgets: list[Budget],
    failing: dict[tuple[str, str, str], Failing],
) -> list[GridLine]:
    """One line per task: each lane@level's passes (and what the others were), its budget."""
    by = {(r["task"], r["lane"], r["level"]): r for r in rows}
    grid: list[GridLine] = []
    for task in dict.fromkeys(r["task"] for r in rows):
        b = next((x for x in budgets if x["task"] == task), None)
        cells: list[Cell] = []
        for lane, level in columns:
            got = by.get((task, lane, level))
            if got is None:
                cells.append({"text": "not run", "file": None})
                continue
            att = [a.strip() for a in got["attempts"].split(",") if a.strip()]
            bad = {a: att.count(a) for a in dict.fromkeys(att) if a != "pass"}
            more = ", ".join(f"{n} {a}" for a, n in bad.items())
            fail = failing.get((task, lane, level))
            cells.append(
                {
                    "text": got["passed"] + (f" ({more})" if more else ""),
                    "file": fail["file"] if fail else None,
                }
            )
        grid.append({"task": task, "cells": cells, "budget": b})
    return grid


def _budget(b: TaskBudget) -> Budget:
    """One task's budget as sent, with the declared one beside it where they differ."""
    declared = (b.visible_tokens, b.reasoning_tokens)
    return {
        "task": b.task,
        "visible": b.visible_budget,
        "reasoning": b.reasoning_budget,
        "max_tokens": b.max_tokens,
        "declared": (
            f"{b.visible_tokens:,} / {b.reasoning_tokens:,}"
            if declared != (b.visible_budget, b.reasoning_budget)
            else None
        ),
    }


_QUALITY = re.compile(r"^quality(?: \((\w+)\))?: ")


def figures(quality: Record | None, gates: list[GateOutcome]) -> list[str]:
    """Its headline line: each lane's tasks passed, or that it did not run."""
    parts = [
        _QUALITY.sub(lambda m: f"{m.group(1)} " if m.group(1) else "", x)
        for x in (quality.lines if quality is not None else [])
    ]
    return ["quality: " + "; ".join(parts) if parts else "quality: not run"]
