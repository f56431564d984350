"""The alias a decision gates, as its document shows it: its target in the house table and the
diff's summary against it, read once its signed decision verifies (`verified`, a diff's side)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import NotRequired, TypedDict

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from qualify.capacity.record import Record as CapacityRecord
from qualify.decision.verify import VerifyReport, read_signed, verify
from qualify.diff.compare import Doc, diff
from qualify.diff.runs import Side, alias_run, locate
from qualify.errors import BadInput, Refused
from qualify.present.reading import RunView, record_of
from qualify.present.record import DecisionRecord
from qualify.present.wording import short
from qualify.trust.repository import TABLE, read_table, snapshot


class AliasSummary(TypedDict):
    """`status` (`compared`, or `unusable` with `why`), and the diff's summary when compared."""

    status: str
    why: str
    against: NotRequired[str]
    regressed: NotRequired[bool]
    lines: NotRequired[list[str]]
    regressions: NotRequired[list[str]]


def verified(label: str, ref: Path, keys: list[Ed25519PublicKey], action: str = "compared") -> Side:
    """The side at `ref`, once its envelope verifies by one of `keys`; else one BadInput that
    names every problem verification found (a doctored run is never compared, nor `action`)."""
    envelope, run = locate(ref, action)
    return _side(label, envelope, [verify(envelope, k, run) for k in keys], action)


def _side(label: str, envelope: Path, reports: list[VerifyReport], action: str) -> Side:
    good = next((r for r in reports if r.ok), None)
    if good is None or good.record is None:
        signed = next((r for r in reports if r.statement is not None), None)
        problems = (signed or reports[0]).problems if reports else ["no key to verify with"]
        why = (
            "it does not verify"
            if signed
            else "it is not signed by a key given (--key) or pinned in the house"
        )
        raise BadInput(
            f"{label}: {envelope}: {why}; nothing is {action}",
            [f"{label}: {p}" for p in problems],
        )
    assert good.view is not None  # a report with a record read the run
    return Side(label, good.view, good.record, envelope, good.signer, list(good.notes))


def summary(doc: Doc) -> AliasSummary:
    """The few lines a decision shows of the diff against its alias's target: against what,
    regressed or not, and every regression."""
    reg = doc["regressions"]
    counts = doc["gates"]["counts"]
    compared = sum(
        1 for f in doc["figures"] if f["comparable"] for m in f["measures"].values() if m["ci95"]
    )
    lines = [
        f"against {doc['a']['candidate']} (run {doc['a']['run_id']}, {doc['a']['headline']})",
        f"gates: {counts.get('regressed', 0)} pass -> fail, {counts.get('fixed', 0)} fail -> "
        f"pass, {counts.get('new', 0)} new, {counts.get('removed', 0)} removed",
        f"figures: {compared} compared with an interval, {len(reg['figures'])} beyond the "
        f"{doc['margin_pct']:g}% margin",
    ]
    if doc["not_comparable"]:
        lines.append("not comparable: " + "; ".join(doc["not_comparable"]))
    return {
        "status": "compared",
        "why": "",
        "against": doc["a"]["run_id"],
        "regressed": doc["regressed"],
        "lines": lines,
        "regressions": ([reg["decision"]] if reg["decision"] else [])
        + [f"gate {g}: pass -> fail" for g in reg["gates"]]
        + reg["figures"],
    }


@dataclass(frozen=True)
class AliasView:
    """What the decision document shows of the alias a candidate gates, read once: its name
    (None when the candidate names none), its current target in the house table (None when it
    points at nothing or no table was read), both in words, and the diff's summary against the
    target (None: nothing to compare with)."""

    name: str | None = None
    target: Mapping[str, object] | None = None  # the raw TOML entry of the house table
    text: str = "gates no production alias: the candidate names none"
    summary: AliasSummary | None = None


def alias_view(
    view: RunView, record: DecisionRecord, house: Path | None = None, evidence: Path | None = None
) -> AliasView:
    """The alias the decision of the run `view` read gates (its record derived, not signed yet),
    its target and the diff's summary against it, verified by the decision keys the house pins;
    the house is `house`, else the one the record was decided under."""
    cand = view.candidate
    if cand is None or cand.alias is None:
        return AliasView()
    name = cand.alias.name
    root = house or (Path(record.house.root) if record.house.root else None)
    if root is None:
        capacity = record_of(view.records(), "capacity", CapacityRecord)
        if capacity is not None and (was := capacity.incumbent.candidate):
            return AliasView(name, text=f"gates `{name}`, which pointed at {was} when capacity ran")
        why = "no house repository given, so its alias table was not read"
        return AliasView(name, text=f"gates `{name}` ({why})")
    try:
        target = read_table(root / TABLE).get(name)
    except BadInput as exc:
        why = f"the house alias table could not be read ({short(exc.headline, 80)})"
        return AliasView(name, text=f"gates `{name}`; {why}")
    if not target:
        return AliasView(name, text=f"gates `{name}`, which points at nothing yet")
    now = f"{target.get('candidate')} (run {target.get('run_id') or 'unknown'}) now"
    text = f"gates `{name}`, which points at {now}"
    if target.get("run_id") == view.run.run_id:  # nothing to compare with
        return AliasView(name, target, text)
    try:
        keys = [k.pub for k in snapshot(root).keys.get("decision", {}).values()]
        if not keys:
            raise Refused(f"the house {root} pins no decision key")
        env = alias_run(target, evidence or view.run.path.parent.parent)
        # Judged again in full when the alias moved to it (`qualify alias set`), and the house
        # table pins its signed payload (`alias_run` found that very one): here its signature
        # and every subject are checked, its stages are not judged again.
        a = _side("A", env, [read_signed(env, k) for k in keys], "compared")
    except (BadInput, Refused) as exc:
        why = str(exc).removeprefix("qualify: ").replace("\n", "; ")
        return AliasView(name, target, text, {"status": "unusable", "why": why})
    b = Side("B", view, record, notes=["the run being decided: its decision is not signed yet"])
    return AliasView(name, target, text, summary(diff(a, b)))
