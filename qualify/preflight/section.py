"""The preflight stage in the decision document: gate x reasoning level, a passed row per
level. A pure function of the stage's gates, not of its record (its reasons are said once,
among the causes)."""

from __future__ import annotations

from qualify.preflight.record import Record
from qualify.present.record import GateOutcome
from qualify.present.sections import shown
from qualify.records import Verdict


def section(record: Record | None, gates: list[GateOutcome]) -> dict[str, object]:
    """What the template's preflight table shows: one column per reasoning level, one totals
    line per level. Reasons are not repeated here: a failing gate is named by its key, its
    reason is written once among the blocking reasons (or the caveats, when advisory)."""
    mine = [g for g in gates if g.stage == "preflight"]
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
        summary.append({"passed": sum(g.verdict is Verdict.PASS for g in here), "n": len(here)})
    return {"functional": {"levels": levels, "rows": rows, "summary": summary}}
