"""Per gate, what changed between two signed decisions: pass -> fail, fail -> pass, new, removed.

A gate is keyed as the decision keys it (`stage/gate@level`). A regression is a gate that passed
in A and, in B, does not pass and blocks the decision (status `blocks` or `vetoes`); an advisory
gate that stops passing is listed as changed, never counted. Under two different policies the
verdicts answer different questions: the changes are listed, not counted, and the thresholds
that differ are named.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import TypedDict

from qualify.present.record import GateOutcome

BLOCKING = ("blocks", "vetoes")


class GateBrief(TypedDict):
    verdict: str
    status: str
    reason: str


class GateRow(TypedDict):
    key: str
    change: str
    a: GateBrief | None
    b: GateBrief | None
    blocking_in_b: bool
    regression: bool


class GatesDiff(TypedDict):
    comparable: bool
    why_not: str | None
    counts: dict[str, int]
    rows: list[GateRow]
    regressions: list[str]


def compare_gates(
    a: list[GateOutcome], b: list[GateOutcome], policy_differs: list[str]
) -> GatesDiff:
    """Every gate of either decision with its change; `regressions` lists the counted ones."""
    ga, gb = {g.key: g for g in a}, {g.key: g for g in b}
    rows: list[GateRow] = []
    for key in sorted(set(ga) | set(gb)):
        x, y = ga.get(key), gb.get(key)
        what = "changed"  # or regressed (pass -> not), fixed (not -> pass), same, new, removed
        if x is None or y is None:
            what = "new" if x is None else "removed"
        elif x.verdict == y.verdict:
            what = "same"
        elif x.verdict.value == "pass":
            what = "regressed"
        elif y.verdict.value == "pass":
            what = "fixed"
        blocking = y is not None and y.status in BLOCKING
        counted = what == "regressed" and blocking and not policy_differs
        brief: list[GateBrief | None] = [
            {"verdict": g.verdict.value, "status": g.status, "reason": (g.reasons or [""])[0]}
            if g
            else None
            for g in (x, y)
        ]
        rows.append(
            {
                "key": key,
                "change": what,
                "a": brief[0],
                "b": brief[1],
                "blocking_in_b": blocking,
                "regression": counted,
            }
        )
    return {
        "comparable": not policy_differs,
        "why_not": (
            f"the two decisions were made under different policies ({len(policy_differs)} "
            f"field{'s' if len(policy_differs) > 1 else ''} differ, first "
            f"{policy_differs[0]}): a verdict that changed may come from the policy, so none "
            "is counted"
        )
        if policy_differs
        else None,
        "counts": Counter(r["change"] for r in rows),
        "rows": rows,
        "regressions": [r["key"] for r in rows if r["regression"]],
    }


def changes(a: Mapping[str, object], b: Mapping[str, object], prefix: str = "") -> list[str]:
    """Each key (sorted) whose value differs, as `key A -> B`."""
    return [
        f"{prefix}{k} {a.get(k)!r} -> {b.get(k)!r}"
        for k in sorted(set(a) | set(b))
        if a.get(k) != b.get(k)
    ]


def policy_differences(pa: Mapping[str, object], pb: Mapping[str, object]) -> list[str]:
    """The policy fields (thresholds by name) that differ, as `name A -> B`."""
    out: list[str] = []
    for key in sorted(set(pa) | set(pb)):
        va, vb = pa.get(key), pb.get(key)
        if key == "thresholds" and isinstance(va, dict) and isinstance(vb, dict):
            out += changes(va, vb, "thresholds.")
        elif va != vb:
            out.append(f"{key} {va!r} -> {vb!r}")
    return out
