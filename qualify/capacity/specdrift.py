"""Speculative acceptance over the soak's time, from the server's own draft counters
(docs/capacity.md, "Speculative acceptance over the soak's time"); the stage and `verify`
derive the thirds from the kept series with this one function."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise

from pydantic import Field

from qualify.ab.acceptance import SGLANG_WIDTH, SpecCounters
from qualify.capacity.parts import Part

SERIES_COLUMNS = ["t_s", "drafts", "draft_tokens", "accepted"]
Row = tuple[float, float, float | None, float]  # one scrape's, in SERIES_COLUMNS, cumulative
NO_SPECULATION = "no speculation"


class AcceptanceThird(Part):
    """One third of the soak's time: the counter deltas over it and the figures they give."""

    from_s: float = 0.0
    to_s: float = 0.0
    drafts: int = 0
    draft_tokens: int | None = None
    accepted: int = 0
    rate: float | None = None
    mean_length: float | None = None


class AcceptanceDrift(Part):
    """The soak's acceptance per third (`acceptance_thirds`); `why` when none is measured."""

    thirds: list[AcceptanceThird] = Field(default_factory=list)
    rate_drift_pct: float | None = None
    length_drift_pct: float | None = None
    why: str | None = None


def spec_point(c: SpecCounters) -> tuple[float, float | None, float] | None:
    """(drafts, draft tokens, accepted) of one scrape, cumulative; None without draft counters.
    SGLang's come from its verify calls and generated tokens (`qualify.ab.acceptance`), which
    are linear in its counters, so their deltas are the deltas of these."""
    if c.counted:
        assert c.drafts is not None and c.accepted is not None
        return c.drafts, c.draft_tokens, c.accepted
    if c.verify_calls is None or c.generated is None:
        return None
    width = c.gauges.get(SGLANG_WIDTH)
    tokens = c.verify_calls * (round(width) - 1) if width is not None and width > 1 else None
    return c.verify_calls, tokens, c.generated - c.verify_calls


def _pct(last: float | None, first: float | None) -> float | None:
    if last is None or not first:
        return None
    return (last / first - 1) * 100


def _third(a: Row, b: Row) -> AcceptanceThird | None:
    """The deltas between two rows of the series; None when a counter went down (a restart)."""
    drafts, accepted = round(b[1] - a[1]), round(b[3] - a[3])
    tokens = None if a[2] is None or b[2] is None else round(b[2] - a[2])
    if min(drafts, accepted, tokens or 0) < 0:
        return None
    return AcceptanceThird(
        from_s=float(a[0]),
        to_s=float(b[0]),
        drafts=drafts,
        draft_tokens=tokens,
        accepted=accepted,
        rate=accepted / tokens if tokens else None,
        mean_length=1.0 + accepted / drafts if drafts > 0 else None,
    )


def acceptance_thirds(series: Sequence[Sequence[float | None]]) -> AcceptanceDrift:
    """Acceptance and mean accepted length per third of the series's span (module docstring)."""
    rows: list[Row] = []
    for r in series:
        if len(r) == 4 and (t := r[0]) is not None and (d := r[1]) is not None:
            rows += [(t, d, r[2], a)] if (a := r[3]) is not None else []
    if len(rows) < 2:
        return AcceptanceDrift(why=f"{NO_SPECULATION}: the engine reported no draft counters")
    if rows[-1][1] - rows[0][1] <= 0:
        return AcceptanceDrift(why=f"{NO_SPECULATION}: no drafts over the soak")
    t0, t1 = float(rows[0][0]), float(rows[-1][0])
    bounds = [t0 + k * (t1 - t0) / 3 for k in (1, 2)]
    marks = [rows[0], *(max((r for r in rows if r[0] <= b), key=lambda r: r[0]) for b in bounds)]
    marks.append(rows[-1])
    thirds = [_third(a, b) for a, b in pairwise(marks)]
    if any(t is None for t in thirds):
        return AcceptanceDrift(why="a draft counter went down during the soak (a restart)")
    kept = [t for t in thirds if t is not None]
    first, last = kept[0], kept[-1]
    return AcceptanceDrift(
        thirds=kept,
        rate_drift_pct=_pct(last.rate, first.rate),
        length_drift_pct=_pct(last.mean_length, first.mean_length),
    )
