"""The context stage in the decision document: cold and warm side by side per rung (cached
tokens, the clamp, prefill n/a where the prompt was cached), each card's lowest free memory
(headroom against the house reserve) and mean power per rung, and the ladder plot (TTFT and
decode against prompt tokens, the needles found and missed at their depth). A pure function of
the stage's typed record."""

from __future__ import annotations

from pathlib import Path

from qualify.context.judges import rung_acceptance
from qualify.context.record import Record, Row
from qualify.evidence.store import RunDir
from qualify.present.cells import Cell, Measure, drafted, given, nums
from qualify.present.plots import Panel, Plot
from qualify.present.record import GateOutcome
from qualify.present.wording import number
from qualify.vram.section import MIB_PER_GIB, free_text, power_text

# What the template shows of a row, as the row has it.
ROW_KEYS = (
    *("actual_prompt_tokens", "cached_tokens", "ttfo_s", "ttft_s", "effective_prefill_tok_s"),
    *("decode_tok_s", "verdict"),
)


def section(record: Record | None, gates: list[GateOutcome]) -> dict[str, object]:
    """What the template's Context section shows."""
    return {"context": context_rows(record or Record())}


def plots(run: RunDir, record: Record | None, here: Path | None) -> list[Plot]:
    return [ladder(record or Record())]


def _rung_key(r: Row) -> tuple[int, str, int]:
    return (r.target, r.content, r.concurrency)


def context_rows(record: Record) -> dict[str, object]:
    """Context rows, cold and warm side by side (never blended), per rung and card."""
    planned = {t.target: t.planned_tokens for t in record.targets if t.clamped}
    side: dict[tuple[int, str, int], dict[str, object]] = {}
    for r in record.rows:
        named = next((t for t, p in planned.items() if p == r.target), None)
        item = side.setdefault(
            _rung_key(r),
            {
                "target": named if named is not None else r.target,
                "clamped_to": r.target if named is not None else planned.get(r.target),
                "content": r.content,
                "concurrency": r.concurrency,
                "cold": None,
                "warm": None,
            },
        )
        found = (f"{d}% {'found' if ok else 'missed'}" for d, ok in sorted(r.needles.items()))
        item[r.pass_] = {k: getattr(r, k) for k in ROW_KEYS} | {
            "needles": ", ".join(found),
            "prefill_note": prefill_note(r),
        }
    return {
        "side": list(side.values()),
        "gpu": gpu_rows(record, side),
        "acceptance": acceptance_line(record),
    }


def acceptance_line(record: Record) -> str | None:
    """Draft acceptance per rung from the server's counters; None in a record without it."""
    if not any(r.acceptance is not None for r in record.rows):
        return None
    counts = rung_acceptance(record)
    if not counts:
        return "Draft acceptance per rung: no speculation (no cell drafted a token)."
    rates = ", ".join(f"{t:,}: {a / n:.2f}" for t, (a, n) in sorted(counts.items()))
    return f"Draft acceptance per rung (server counters, accepted of drafted tokens): {rates}."


def prefill_note(r: Row) -> str | None:
    """Why a row's effective prefill is no prefill figure: most of its prompt was cached, so
    prompt tokens over TTFO counts tokens the server never processed; or it is a warm repeat
    whose cache hit the server does not report, so nothing says how much was processed."""
    prompt, cached = r.actual_prompt_tokens, r.cached_tokens
    if cached is None and r.pass_ == "warm":
        return "n/a (warm; cached tokens unreported)"
    if prompt is not None and cached is not None and prompt > 0 and cached >= prompt / 2:
        return f"n/a ({100 * cached / prompt:.0f}% cached)"
    return None


def gpu_rows(
    record: Record, side: dict[tuple[int, str, int], dict[str, object]]
) -> dict[str, object]:
    """Per rung (cold and warm side by side) and card: the lowest free memory with its headroom
    over the house reserve, and the mean power, over the cell's timed sends. "No GPU
    telemetry", once, where the run had none; nothing for a record of a build that did not
    mark the cells (no `gpu`)."""
    if (note := record.gpu) is None:
        return {"note": None, "reserve_gib": None, "rows": []}
    cells = {(_rung_key(r), r.pass_): r.gpu for r in record.rows if r.gpu is not None}
    cards = sorted({g for gpu in cells.values() for g in gpu.cards})
    if not cards:
        return {"note": note.why or "no GPU telemetry", "reserve_gib": note.reserve_gib, "rows": []}
    rows: list[dict[str, object]] = []
    for key, item in side.items():
        for g in cards:
            row = {k: item[k] for k in ("target", "clamped_to", "content", "concurrency")}
            row |= {"gpu": g, "under": False}
            for p in ("cold", "warm"):
                ran = cells.get((key, p))
                x = ran.cards.get(g) if ran is not None else None
                low, watts = (x.min_free_mib, x.mean_power_w) if x else (None, None)
                if low is not None and low < note.reserve_gib * MIB_PER_GIB:
                    row["under"] = True
                row[f"{p}_free"] = free_text(low, note.reserve_gib) if ran else "not run"
                row[f"{p}_power"] = power_text(watts) if ran else "not run"
                row[f"{p}_min_free_mib"], row[f"{p}_mean_power_w"] = low, watts
            rows.append(row)
    return {"note": None, "reserve_gib": note.reserve_gib, "rows": rows}


def ladder(record: Record) -> Plot:
    """TTFT and decode against actual prompt tokens, cold and warm apart; the needles found
    (o) and missed (x) at their depth, per pass."""
    ttft, decode = Panel("TTFT (s)"), Panel("decode (tok/s)")
    needles = Panel("needle depth (%)", scatter=True)
    for r in record.rows:
        if r.actual_prompt_tokens is None:
            continue
        x = float(r.actual_prompt_tokens)
        for panel, y in ((ttft, r.ttft_s), (decode, r.decode_tok_s)):
            if y is not None:
                panel.series.setdefault(r.pass_, []).append((x, float(y)))
        for depth, ok in sorted(r.needles.items()):
            if not depth.replace(".", "", 1).isdigit():
                continue
            label = f"{r.pass_} {'found' if ok else 'missed'}"
            needles.series.setdefault(label, []).append((x, float(depth)))
            needles.markers[label] = "o" if r.pass_ == "cold" else "^"
            needles.colors[label] = "tab:green" if ok else "tab:red"
    for p in (ttft, decode, needles):
        p.series = {k: sorted(v) for k, v in sorted(p.series.items())}
    panels = [ttft, decode] + ([needles] if needles.series else [])
    return Plot("context-ladder.png", "Context ladder", "prompt tokens", panels)


def context_reach(ctx: Record | None) -> dict[str, tuple[int | None, int]]:
    """Per pass (cold, warm) that timed a cell: the largest prompt (tokens) of a cell that
    passed (None when none did) and the largest one sent."""
    rows = ctx.rows if ctx is not None else []
    out: dict[str, tuple[int | None, int]] = {}
    for p in ("cold", "warm"):
        mine = [r for r in rows if r.pass_ == p]
        ok = [r for r in mine if r.verdict == "pass"]
        top = max((r.actual_prompt_tokens or 0 for r in ok), default=None)
        if mine:
            out[p] = (top or None, max(r.actual_prompt_tokens or 0 for r in mine))
    return out


def figures(ctx: Record | None, gates: list[GateOutcome]) -> list[str]:
    """Its headline line: the largest prompt that passed, per pass, of the largest sent."""
    if ctx is None or not ctx.rows:
        return ["context reached: not run"]
    parts = [
        f"{p} {number(top, 0) if top else 'none'} passed of {number(most, 0)} sent"
        for p, (top, most) in context_reach(ctx).items()
    ]
    return ["context reached: " + "; ".join(parts) + " prompt tokens"]


def _context_cell(row: Row, level: str | None) -> Cell:
    key = f"{row.planned_tokens} {row.pass_} {row.content} c={row.concurrency}"
    setting: dict[str, object] = {
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
    if (rate := drafted(row.acceptance, len(row.streams))) is not None:
        c.measures["acceptance"] = rate
    if needles := [all(s.needles.values()) for s in streams if s.needles]:
        c.measures["needles found"] = Measure("rate", "higher", counts=(sum(needles), len(needles)))
    return c


def diff_cells(rec: Record) -> list[Cell]:
    """Per rung (the size run), pass, content and concurrency: every counted stream's figures;
    per rung and task kind, the audit's checks passed (`audits`, when the stage ran them)."""
    written = given(rec, ("level",))["level"]
    level = written if isinstance(written, str) else None
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
