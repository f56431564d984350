"""The quality stage in the decision document: task x lane@level with the budget as sent
beside the declared one, each failing cell linked to its attempt. A pure function of the
stage's record."""

from __future__ import annotations

import re
from collections.abc import Sequence

from qualify.present.record import GateOutcome
from qualify.quality.record import Record, TaskBudget


def section(record: Record | None, gates: list[GateOutcome]) -> dict[str, object]:
    """What the template's quality table shows: scope, tasks x lane@level, budgets as sent."""
    files: dict[tuple[str, str, str], str] = {}
    for f in record.failures if record else []:
        if f.evidence:
            files.setdefault((f.task, f.lane or "candidate", f.level), f.evidence[0])
    table = record.table if record else []
    by = {(r.task, r.lane or "candidate", r.level or "default"): r.attempts for r in table}
    columns = list(dict.fromkeys((lane, level) for _, lane, level in by))
    budgets = {b.task: b for b in reversed(record.budgets)} if record else {}
    grid = [
        {
            "task": task,
            "cells": [_cell(by.get((task, *c)), files.get((task, *c))) for c in columns],
            "budget": budgets.get(task),
            "declared": declared(budgets.get(task)),
        }
        for task in dict.fromkeys(task for task, _, _ in by)
    ]
    quality = {
        "scope": record.scope if record else None,
        "columns": [(lane if lane != "candidate" else "", level) for lane, level in columns],
        "grid": grid,
        "budget_scale": record.budget_scale if record else None,
    }
    return {"quality": quality}


def _cell(attempts: Sequence[str] | None, file: str | None) -> dict[str, object]:
    """One lane@level's passes (and what the others were), linked to its first failing file."""
    if attempts is None:
        return {"text": "not run", "file": None}
    att = list(attempts) or ["not run"]
    more = ", ".join(f"{att.count(a)} {a}" for a in dict.fromkeys(att) if a != "pass")
    text = f"{attempts.count('pass')}/{len(attempts)}" + (f" ({more})" if more else "")
    return {"text": text, "file": file}


def declared(b: TaskBudget | None) -> str | None:
    """A task's declared budgets, shown beside the ones sent where the scale changed them."""
    if b is None or (b.visible_tokens, b.reasoning_tokens) == (
        b.visible_budget,
        b.reasoning_budget,
    ):
        return None
    return f"{b.visible_tokens:,} / {b.reasoning_tokens:,}"


_QUALITY = re.compile(r"^quality(?: \((\w+)\))?: ")


def figures(quality: Record | None, gates: list[GateOutcome]) -> list[str]:
    """Its headline line: each lane's tasks passed, or that it did not run."""
    parts = [
        _QUALITY.sub(lambda m: f"{m.group(1)} " if m.group(1) else "", x)
        for x in (quality.lines if quality is not None else [])
    ]
    return ["quality: " + "; ".join(parts) if parts else "quality: not run"]
