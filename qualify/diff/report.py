"""The diff as Markdown: a header of the two runs, the gates that changed, a table per group of
figures (one row per cell), and what could not be compared, with why."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from qualify.diff.compare import Doc, SideDoc
    from qualify.diff.figures import FigureDiff, MeasureDiff

VERDICT_ORDER = (
    "regression",
    "worse, inconclusive (interval reaches inside the margin)",
    "worse beyond margin, one reading (not counted)",
    "worse, within margin",
    "no per cent (A is 0)",
    "no figure",
    "within margin",
    "within margin, one reading",
    "better, one reading",
    "better",
)
SHORT = {
    "regression": "**regression**",
    "worse, inconclusive (interval reaches inside the margin)": "worse, inconclusive",
    "worse beyond margin, one reading (not counted)": "worse, one reading",
    "within margin, one reading": "within margin (one reading)",
    "better, one reading": "better (one reading)",
}
NAMES = {
    "decode_tok_s": "decode",
    "decode_tok_s_p50": "decode p50",
    "aggregate_output_tok_s": "aggregate",
    "ttft_s": "TTFT",
    "ttft_p50_s": "TTFT p50",
    "e2e_s": "E2E",
    "e2e_p50_s": "E2E p50",
    "ttfo_s": "TTFO",
    "effective_prefill_tok_s": "prefill",
    "min_free_mib": "min free",
}
LIST_MAX = 12


def value(v: float | None, unit: str) -> str:
    if v is None:
        return "-"
    if unit == "s":
        return f"{v * 1000:,.1f} ms" if abs(v) < 1 else f"{v:,.2f} s"
    if unit == "rate":
        return f"{v:.1%}"
    if unit == "MiB":
        return f"{v:,.0f} MiB"
    return f"{v:,.1f}"


def measure_text(m: MeasureDiff) -> str:
    text = f"{value(m['a'], m['unit'])} → {value(m['b'], m['unit'])}"
    if m["delta_pct"] is not None:
        text += f", {m['delta_pct']:+.1f}%"
        if m["ci95_pct"]:
            lo, hi = m["ci95_pct"]
            text += f" [{lo:+.1f}, {hi:+.1f}]"
    return text


def _worst(measures: dict[str, MeasureDiff]) -> tuple[str, list[str]]:
    rank = {v: i for i, v in enumerate(VERDICT_ORDER)}
    if not measures:
        return "no figure", []
    worst = min((m["verdict"] for m in measures.values()), key=lambda v: rank.get(v, 99))
    names = [NAMES.get(n, n) for n, m in measures.items() if m["verdict"] == worst]
    return worst, names


def _listed(items: list[str]) -> str:
    head = ", ".join(items[:LIST_MAX])
    more = len(items) - LIST_MAX
    return head + (f" and {more} more" if more > 0 else "")


def _header(doc: Doc) -> list[str]:
    a, b = doc["a"], doc["b"]
    word = "**regression**" if doc["regressed"] else "no regression beyond the house's margins"
    lines = [
        f"# qualify diff: {a['candidate']} → {b['candidate']}",
        "",
        f"Result: {word} (exit {1 if doc['regressed'] else 0}). A is the baseline; every delta "
        f"is B − A, in per cent of A; intervals are 95%; the margin is {doc['margin_pct']:g}% "
        f"({doc['margin_source']}).",
        "",
        "| | A | B |",
        "| --- | --- | --- |",
        f"| run | {a['run_id']} | {b['run_id']} |",
        f"| decision | {a['headline']} | {b['headline']} |",
        f"| verified | {_signed(a)} | {_signed(b)} |",
        f"| engine | {a['engine'] or '-'} | {b['engine'] or '-'} |",
        f"| hardware | {a['hardware']} | {b['hardware']} |",
        f"| policy | {a['policy_sha256'][:16]} | "
        f"{'same' if doc['policy']['same'] else b['policy_sha256'][:16]} |",
        f"| stages | {', '.join(a['stages'])} | {', '.join(b['stages'])} |",
        "",
    ]
    if doc["recipe_changes"]:
        lines += ["Recipe changes (identity pins): " + "; ".join(doc["recipe_changes"]) + ".", ""]
    if not doc["policy"]["same"]:
        lines += ["Policy changes: " + "; ".join(doc["policy"]["differences"]) + ".", ""]
    reg = doc["regressions"]
    if doc["regressed"]:
        lines += ["Regressions:", ""]
        lines += [f"- {reg['decision']}"] if reg["decision"] else []
        lines += [f"- gate {g}: pass → fail" for g in reg["gates"]]
        lines += [f"- {f}" for f in reg["figures"]]
        lines.append("")
    for n in doc["notes"]:
        lines.append(f"Note: {n}")
    if doc["notes"]:
        lines.append("")
    return lines


def _signed(side: SideDoc) -> str:
    if not side["verified"]:
        return "not signed yet (the run being decided)"
    return f"yes, signer {str(side['signer'])[:16]}"


def _gates(doc: Doc) -> list[str]:
    g = doc["gates"]
    c = g["counts"]
    lines = [
        "## Gates",
        "",
        f"{c.get('same', 0)} unchanged, {c.get('regressed', 0)} pass → fail, "
        f"{c.get('fixed', 0)} fail → pass, {c.get('changed', 0)} other changes, "
        f"{c.get('new', 0)} new (B only), {c.get('removed', 0)} removed (A only).",
        "",
    ]
    if g["why_not"]:
        lines += [f"Not counted: {g['why_not']}.", ""]
    changed = [r for r in g["rows"] if r["change"] in ("regressed", "fixed", "changed")]
    if changed:
        lines += ["| gate | A | B | change |", "| --- | --- | --- | --- |"]
        for r in changed:
            a, b = r["a"], r["b"]
            assert a is not None and b is not None  # a gate that changed is in both decisions
            what = {"regressed": "pass → fail", "fixed": "fail → pass"}.get(r["change"], "changed")
            if r["regression"]:
                what = f"**{what}** (blocks B)"
            why = f": {_cell(b['reason'])}" if b["reason"] else ""
            lines.append(f"| {r['key']} | {a['verdict']} | {b['verdict']}{why} | {what} |")
        lines.append("")
    for kind, word in (("new", "New in B"), ("removed", "Only in A")):
        keys = [r["key"] for r in g["rows"] if r["change"] == kind]
        if keys:
            lines += [f"{word}: {_by_stage(keys)}.", ""]
    return lines


def _by_stage(keys: list[str]) -> str:
    """Gate keys grouped by stage: a stage with more than three gates is counted."""
    stages: dict[str, list[str]] = {}
    for k in keys:
        stages.setdefault(k.split("/", 1)[0], []).append(k)
    return "; ".join(
        f"{stage}: {len(ks)} gates" if len(ks) > 3 else ", ".join(ks)
        for stage, ks in stages.items()
    )


def _cell(text: str, limit: int = 90) -> str:
    text = text.replace("|", "\\|").replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _group_table(group: str, entries: list[FigureDiff]) -> list[str]:
    names: list[str] = []
    for e in entries:
        for n in e["measures"]:
            if n not in names and not n.startswith("position "):
                names.append(n)
    positions = any(n.startswith("position ") for e in entries for n in e["measures"])
    head = ["cell", *[NAMES.get(n, n) for n in names]] + (["positions"] if positions else [])
    lines = [f"### {group}", "", "| " + " | ".join([*head, "verdict"]) + " |"]
    lines.append("|" + " --- |" * (len(head) + 1))
    for e in entries:
        ms = e["measures"]
        row = [e["cell"], *[measure_text(ms[n]) if n in ms else "-" for n in names]]
        if positions:
            row.append(_positions(ms))
        worst, which = _worst({n: m for n, m in ms.items() if not n.startswith("position ")})
        row.append(
            SHORT.get(worst, worst)
            + (
                f" ({', '.join(which)})"
                if which and worst not in ("within margin", "within margin, one reading")
                else ""
            )
        )
        lines.append("| " + " | ".join(row) + " |")
    return [*lines, ""]


def _positions(ms: dict[str, MeasureDiff]) -> str:
    pos = {int(n.removeprefix("position ")): m for n, m in ms.items() if n.startswith("position ")}
    runs: list[tuple[int, int, str]] = []  # consecutive positions with one verdict
    for i in sorted(pos):
        v = pos[i]["verdict"]
        if v in ("within margin", "no figure"):
            continue
        if runs and runs[-1][1] == i - 1 and runs[-1][2] == v:
            runs[-1] = (runs[-1][0], i, v)
        else:
            runs.append((i, i, v))
    off = [f"{lo if lo == hi else f'{lo}-{hi}'}: {SHORT.get(v, v)}" for lo, hi, v in runs]
    return f"{len(pos)} compared" + (f"; {_listed(off)}" if off else ", all within margin")


def _figures(doc: Doc) -> list[str]:
    lines = ["## Figures", ""]
    groups: dict[str, list[FigureDiff]] = {}
    for f in doc["figures"]:
        if f["comparable"]:
            groups.setdefault(f["group"], []).append(f)
    if not groups:
        lines += ["No figure was measured on the same cell in both runs.", ""]
    for group, entries in groups.items():
        lines += _group_table(group, entries)
    off: dict[tuple[str, str], list[str]] = {}
    for f in doc["figures"]:
        if not f["comparable"]:
            off.setdefault((f["group"], f["why"]), []).append(f["cell"])
    if off:
        lines += ["### Not comparable", ""]
        for (group, why), cells in off.items():
            lines.append(f"- {group}: {_listed(cells)}: {why}")
        lines.append("")
    return lines


def markdown(doc: Doc) -> str:
    return "\n".join(_header(doc) + _gates(doc) + _figures(doc)).rstrip() + "\n"
