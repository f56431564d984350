"""Identity's judges: every pin against what the server or the launch showed, in the engine's
own words (`qualify.serving.identity`), and whether the server answered at all.

A pin nobody reports is *unverifiable*, with the reason: it makes its gate inconclusive unless
the house lists it in `thresholds.unverifiable_pins`, when it passes marked `verified: false`.
Every verified pin names its source and what proved it (`qualify.serving.identity.ProvedBy`).
"""

from __future__ import annotations

from qualify.gates.files import Params
from qualify.gates.registry import Judged, judge
from qualify.gates.thresholds import Thresholds
from qualify.identity.record import Record
from qualify.records import Verdict
from qualify.serving.engine import adapter


class PinsParams(Params):
    """No knobs: which pins exist is the candidate model's, what may stay unverified is policy."""


class ReachableParams(Params):
    """No knobs."""


def _unverified(pin: str, why: str, pinned: object, thresholds: Thresholds) -> Judged:
    metrics = {"pinned": pinned, "reported": None, "verified": False, "why": why}
    if pin in thresholds.unverifiable_pins:
        note = f"{pin} not verified ({why}); the house accepts it (thresholds.unverifiable_pins)"
        return Judged(Verdict.PASS, [note], metrics, part=pin)
    return Judged(Verdict.INCONCLUSIVE, [f"{pin} cannot be verified: {why}"], metrics, part=pin)


@judge("identity", "identity-pins", PinsParams)
def pins(record: Record, params: PinsParams, thresholds: Thresholds) -> list[Judged]:
    """One verdict per pin: the engine adapter compares the pin with what was seen."""
    engine = adapter(record.engine or record.pins.engine)
    out: list[Judged] = []
    for pin, want in record.pins.model_dump(mode="json").items():
        seen = record.seen.get(pin)
        if record.unpinned is not None and pin in record.unpinned:
            shown = None if seen is None else seen.value
            note = f"{pin} not pinned: the recipe claims nothing to verify"
            out.append(Judged(Verdict.PASS, [note], {"pinned": None, "reported": shown}, part=pin))
            continue
        if seen is None:
            why = record.unverifiable.get(pin, "nothing reports it")
            out.append(_unverified(pin, why, want, thresholds))
            continue
        got, source, by = seen.value, seen.source, seen.by
        same, note = engine.same(pin, want, got)
        metrics = {
            "pinned": want,
            "reported": got,
            "source": source,
            "proved_by": by,
            "verified": True,
        }
        if same is None:
            out.append(_unverified(pin, f"{source}: {note}", want, thresholds))
        elif same:
            out.append(Judged(Verdict.PASS, [], {**metrics, "note": note}, part=pin))
        else:
            shown = f"pinned {pin} {want!r}, {source} reports {got!r}"
            reason = f"{shown} ({note})" if note else shown
            out.append(Judged(Verdict.FAIL, [reason], metrics, part=pin))
    return out


@judge("identity", "identity-reachable", ReachableParams)
def reachable(record: Record, params: ReachableParams, thresholds: Thresholds) -> list[Judged]:
    """`error` when the server did not answer `GET /v1/models`: nothing it says can be read."""
    if record.unreachable:
        return [Judged(Verdict.ERROR, [f"GET /v1/models failed: {record.unreachable}"])]
    return [Judged(Verdict.PASS)]
