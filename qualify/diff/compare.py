"""`qualify diff`: two verified qualifications compared, gate by gate and figure by figure.

`diff(a, b)` is the whole comparison as one JSON-able document (A is the baseline, B the run
compared with it; deltas are B - A); `exit_code` reads it (0: no regression beyond the house's
margins, 1: a regression).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import NamedTuple, TypedDict

from qualify.diff.figures import FigureDiff, compare_figures
from qualify.diff.gates import GatesDiff, changes, compare_gates, policy_differences
from qualify.diff.report import NAMES
from qualify.diff.runs import Side
from qualify.identity.record import Record as IdentityRecord
from qualify.present.reading import record_of
from qualify.trust.house import PolicyRules
from qualify.vram.record import Card
from qualify.vram.record import Record as VramRecord

EXIT_SAME = 0
EXIT_REGRESSION = 1


class SideDoc(TypedDict):
    """A side of the diff as its document names it."""

    label: str
    run: str
    run_id: str
    candidate: str
    decision: str
    headline: str
    decided_at: str
    envelope: str | None
    verified: bool
    signer: str | None
    policy_sha256: str
    stages: list[str]
    notes: list[str]
    engine: str | None
    hardware: str


class PolicyDiff(TypedDict):
    same: bool
    differences: list[str]


class Regressions(TypedDict):
    decision: str | None
    gates: list[str]
    figures: list[str]


class Doc(TypedDict):
    """The comparison of B against A (see the module docstring)."""

    version: int
    a: SideDoc
    b: SideDoc
    policy: PolicyDiff
    recipe_changes: list[str]
    margin_pct: float
    margin_source: str
    not_comparable: list[str]
    notes: list[str]
    gates: GatesDiff
    figures: list[FigureDiff]
    regressions: Regressions
    regressed: bool


class About(NamedTuple):
    """A side as the document names it, the cards the VRAM stage saw, the CPU model run.json
    names and the identity stage's pins (their JSON form; nothing when it left no record)."""

    doc: SideDoc
    cards: list[Card]
    cpu: str | None
    pins: dict[str, object]


def about(side: Side) -> About:
    rec, records, cand = side.record, side.records, side.view.candidate
    ident = record_of(records, "identity", IdentityRecord)
    pins = ident.pins.model_dump(mode="json") if ident else {}
    engine = str(pins["engine"]) if pins.get("engine") else None
    vram = record_of(records, "vram", VramRecord)
    cards = vram.cards if vram else []
    cpu = side.view.info.get("cpu")
    cpu = cpu if isinstance(cpu, dict) else {}
    names = Counter(f"{c.name} ({c.total_mib:,.0f} MiB)" if c.total_mib else c.name for c in cards)
    parts = [f"{n} x {label}" for label, n in names.items()]
    if cpu:
        parts.append(f"CPU {cpu.get('model')} ({cpu.get('cores')} cores)")
    doc: SideDoc = {
        "label": side.label,
        "run": str(side.run.path),
        "run_id": side.run.run_id,
        "candidate": rec.candidate,
        "decision": rec.decision,
        "headline": rec.headline,
        "decided_at": rec.decided_at,
        "envelope": str(side.envelope) if side.envelope else None,
        "verified": side.verified,
        "signer": side.signer,
        "policy_sha256": rec.policy_sha256,
        "stages": list(side.view.stages),
        "notes": side.notes,
        "engine": engine or (cand.identity.engine if cand else None),
        "hardware": ", ".join(parts) or "not recorded",
    }
    return About(doc, cards, str(cpu["model"]) if cpu.get("model") else None, pins)


def run_reasons(a: About, b: About) -> tuple[list[str], list[str]]:
    """(why no figure of the two runs is comparable, notes): another engine or hardware."""
    reasons, notes = [], []
    ea, eb = a.doc["engine"], b.doc["engine"]
    if ea and eb and ea != eb:
        reasons.append(f"the engine differs ({ea} in A, {eb} in B)")
    cards_a = sorted((c.name, c.total_mib) for c in a.cards)
    cards_b = sorted((c.name, c.total_mib) for c in b.cards)
    if a.cards and b.cards and cards_a != cards_b:
        text_a, text_b = a.doc["hardware"], b.doc["hardware"]
        reasons.append(f"the hardware differs ({text_a} in A, {text_b} in B)")
    elif bool(a.cards) != bool(b.cards):
        reasons.append(f"the hardware differs (GPU cards seen in {'A' if a.cards else 'B'} only)")
    if a.cpu and b.cpu and a.cpu != b.cpu:
        reasons.append(f"the CPU differs ({a.cpu} in A, {b.cpu} in B)")
    if not a.cards and not b.cards and not (a.cpu and b.cpu):
        notes.append("the hardware is not recorded in both runs: assumed the same")
    return reasons, notes


def _flat(d: Mapping[str, object], prefix: str = "") -> dict[str, object]:
    out: dict[str, object] = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def diff(a: Side, b: Side) -> Doc:
    """The comparison of B against A as one document (see module docstring)."""
    policy = policy_differences(a.record.policy, b.record.policy)
    gates = compare_gates(a.record.evaluation.gates, b.record.evaluation.gates, policy)
    sa, sb = about(a), about(b)
    reasons, notes = run_reasons(sa, sb)
    # the house's margin for a figure: the smaller of the two policies' when they differ, so a
    # loosened policy never hides a regression
    ma, mb = (PolicyRules.model_validate(s.record.policy).thresholds for s in (a, b))
    pa, pb = ma.ab_max_regression_pct, mb.ab_max_regression_pct
    margin, margin_source = min(pa, pb), "the policy's thresholds.ab_max_regression_pct"
    if pa != pb:
        margin_source = (
            f"thresholds.ab_max_regression_pct: the smaller of A's {pa:g}% and B's {pb:g}%"
        )
    figures = compare_figures(a.records, b.records, margin, reasons)
    regressions = [
        f"{f['group']} {f['cell']}: {NAMES.get(name, name)} {m['delta_pct']:+.1f}% (interval "
        f"{ci[0]:+.1f}% to {ci[1]:+.1f}%)"
        for f in figures
        if f["comparable"]
        for name, m in f["measures"].items()
        if m["verdict"] == "regression" and (ci := m["ci95_pct"]) is not None
    ]
    decision = None
    if a.record.promote and not b.record.promote:
        decision = f"the decision went from promote to {b.record.decision}"
    return {
        "version": 1,
        "a": sa.doc,
        "b": sb.doc,
        "policy": {"same": not policy, "differences": policy},
        # the identity pins that differ: what the two recipes changed
        "recipe_changes": changes(_flat(sa.pins), _flat(sb.pins)),
        "margin_pct": margin,
        "margin_source": margin_source,
        "not_comparable": reasons,
        "notes": notes + [f"A: {n}" for n in a.notes] + [f"B: {n}" for n in b.notes],
        "gates": gates,
        "figures": figures,
        "regressions": {
            "decision": decision,
            "gates": gates["regressions"],
            "figures": regressions,
        },
        "regressed": bool(decision or gates["regressions"] or regressions),
    }


def exit_code(doc: Doc) -> int:
    return EXIT_REGRESSION if doc["regressed"] else EXIT_SAME
