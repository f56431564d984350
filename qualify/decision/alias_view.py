"""The alias a decision gates, as its document shows it: its target in the house table and the
diff's summary against it, read once its signed decision verifies (`verified`, a diff's side)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import NotRequired, TypedDict

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from qualify.decision.verify import VerifyReport, read_signed, verify
from qualify.diff.compare import diff, summary
from qualify.diff.runs import Side, alias_run, locate, unsigned
from qualify.errors import BadInput, Refused
from qualify.present.reading import RunView
from qualify.present.record import DecisionRecord
from qualify.trust.repository import TABLE, read_table, snapshot


class AliasSummary(TypedDict):
    """`decision_summary`: `status` and `why`, and the diff's summary when compared."""

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


def decision_summary(
    view: RunView,
    record: DecisionRecord,
    alias: str | None,
    house: Path | None,
    evidence: Path | None = None,
) -> AliasSummary:
    """For the decision of the run `view` read (its record derived, not signed yet): the diff's
    summary against the qualification its alias points at now, verified by the decision keys
    the house pins. Always a table with `status`: `compared` (and the summary's fields), `none`
    (no alias or nothing behind it yet) or `unusable` (with why: not verifiable, not found)."""
    if alias is None or house is None:
        return {"status": "none", "why": "no alias or no house to read it from"}
    table = house / TABLE
    try:
        target = read_table(table).get(alias)
        if not target:
            return {"status": "none", "why": f"alias {alias!r} points at nothing yet"}
        if target.get("run_id") == view.run.run_id:
            return {"status": "none", "why": f"alias {alias!r} points at this very run"}
        keys = [k.pub for k in snapshot(house).keys.get("decision", {}).values()]
        if not keys:
            return {"status": "unusable", "why": f"the house {house} pins no decision key"}
        env = alias_run(target, evidence or view.run.path.parent.parent)
        # Judged again in full when the alias moved to it (`qualify alias set`), and the house
        # table pins its signed payload (`alias_run` found that very one): here its signature
        # and every subject are checked, its stages are not judged again.
        a = _side("A", env, [read_signed(env, k) for k in keys], "compared")
    except (BadInput, Refused) as exc:
        why = str(exc).removeprefix("qualify: ").replace("\n", "; ")
        return {"status": "unusable", "why": why}
    doc = diff(a, unsigned("B", view, record))
    return {"status": "compared", "why": "", **summary(doc)}


@dataclass(frozen=True)
class AliasView:
    """What the decision document shows of the alias a candidate gates, read once: its name
    (None when the candidate names none), its current target in the house table (None when it
    points at nothing or no table was read), why the table could not be read, whether a house
    was given at all, and the diff's summary against the target (`decision_summary`)."""

    name: str | None = None
    target: Mapping[str, object] | None = None  # the raw TOML entry of the house table
    error: str | None = None
    house: bool = False
    summary: AliasSummary = field(default_factory=lambda: AliasSummary(status="none", why=""))


def alias_view(
    view: RunView, record: DecisionRecord, house: Path | None = None, evidence: Path | None = None
) -> AliasView:
    """The alias of the decision of the run `view` read, its target and the diff's summary
    against it; the house is `house`, else the one the record was decided under."""
    cand = view.candidate
    if cand is None or cand.alias is None:
        return AliasView()
    name = cand.alias.name
    root = house or (Path(record.house.root) if record.house.root else None)
    if root is None:
        return AliasView(name)
    try:
        target = read_table(root / TABLE).get(name)
    except BadInput as exc:
        return AliasView(name, error=exc.headline, house=True)
    if not target:
        return AliasView(name, house=True)
    return AliasView(
        name, target, house=True, summary=decision_summary(view, record, name, root, evidence)
    )
