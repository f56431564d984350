"""The context stage's `qualify diff` cells (its spec's `cells`):
per rung, pass, content and concurrency."""

from __future__ import annotations

from qualify.context.record import Record, Row
from qualify.present.cells import Cell, Measure, given, nums


def _context_cell(row: Row, level: str | None) -> Cell:
    key = f"{row.planned_tokens} {row.pass_} {row.content} c={row.concurrency}"
    setting = {
        "planned_tokens": row.planned_tokens,
        "pass": row.pass_,
        "content": row.content,
        "concurrency": row.concurrency,
        "level": level,
    }
    streams = [s for s in row.streams if not s.problem]
    speedy = [s for s in streams if not s.degenerate]
    c = Cell("context", key, setting)
    c.measures["ttfo_s"] = Measure("s", "lower", nums(s.ttfo_s for s in streams))
    c.measures["effective_prefill_tok_s"] = Measure(
        "tok/s", "higher", nums(s.effective_prefill_tok_s for s in streams)
    )
    c.measures["decode_tok_s"] = Measure("tok/s", "higher", nums(s.decode_tok_s for s in speedy))
    needles = [all(s.needles.values()) for s in streams if s.needles]
    if needles:
        c.measures["needles found"] = Measure("rate", "higher", counts=(sum(needles), len(needles)))
    return c


def cells(rec: Record) -> list[Cell]:
    """Per rung (the size run), pass, content and concurrency: every counted stream's figures;
    per rung and task kind, the audit's checks passed (`audits`, when the stage ran them)."""
    level = given(rec, ("level",))["level"]
    out = [_context_cell(row, level) for row in rec.rows if row.verdict != "error"]
    tasks: dict[str, Cell] = {}
    for a in rec.audits.by_kind if rec.audits else []:
        key = f"{a.planned_tokens} {a.pass_} {a.content} ({a.form})"
        setting = {"planned_tokens": a.planned_tokens, "pass": a.pass_, "content": a.content}
        setting["form"] = a.form
        # The depths are not matched: aggregation's notes are placed at random per run.
        c = tasks.setdefault(key, Cell("context tasks", key, {**setting, "level": level}))
        c.measures[a.kind] = Measure("rate", "higher", counts=(a.passed, a.asked))
    out.extend(tasks.values())
    return out
