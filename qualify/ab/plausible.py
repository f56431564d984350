"""Advisory judges of A/B figures the evidence itself contradicts: they never block, they say
where a figure should not be trusted as printed (one draft cannot accept more tokens than it
proposes; requests far above the lane's median are in the medians and the plot)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from qualify.ab.judges import drafting_lanes, no_lanes
from qualify.ab.record import LANES, Acceptance, Record
from qualify.gates.files import Params
from qualify.gates.registry import Judged, judge
from qualify.gates.thresholds import Thresholds
from qualify.records import Verdict

STAGE = "ab"


class OverrunParams(Params):
    pass


class OutlierParams(Params):
    factor: Annotated[float, Field(gt=1)] = Field(
        2.0, description="a counted request decoding above this many times its lane's median"
    )


@judge(STAGE, "ab-draft-overrun", OverrunParams)
def draft_overrun(data: Record, params: OverrunParams, thresholds: Thresholds) -> list[Judged]:
    """Per drafting lane: fail when the acceptance counters give more accepted tokens per draft
    than the pinned `identity.speculation.draft_tokens`; inconclusive without counted drafts or
    a pinned length; skipped when neither lane drafts."""
    spec, early = drafting_lanes(data)
    if early:
        return early
    out: list[Judged] = []
    for lane in spec:
        block = data.lanes[lane]
        pinned = block.speculation.draft_tokens
        acc = block.acceptance or Acceptance()
        per, source = acc.per_draft, acc.source
        metrics = {"accepted_per_draft": per, "pinned_draft_tokens": pinned, "source": source}
        if per is None or not pinned:
            why = f"{lane}: no counted drafts or no pinned draft length to hold them against"
            out.append(Judged(Verdict.INCONCLUSIVE, [why], metrics, part=lane))
        elif per > pinned:
            why = (
                f"{lane}: the acceptance counters give {per:.1f} accepted tokens per draft, "
                f"more than the pinned draft length of {pinned}; the counters' scope "
                f"({source or 'not recorded'}) is not one draft per request, so the acceptance "
                "figures are unverified"
            )
            out.append(Judged(Verdict.FAIL, [why], metrics, part=lane))
        else:
            out.append(Judged(Verdict.PASS, [], metrics, part=lane))
    return out


@judge(STAGE, "ab-decode-outliers", OutlierParams)
def decode_outliers(data: Record, params: OutlierParams, thresholds: Thresholds) -> list[Judged]:
    """Per lane: fail when a counted request (not failed, excluded or degenerate) decoded above
    `factor` times the lane's median decode tok/s; inconclusive without a lane median."""
    if early := no_lanes(data):
        return early
    out: list[Judged] = []
    for lane in LANES:
        block = data.lanes[lane]
        median = block.figure.decode_tok_s
        if median is None or median <= 0:
            why = f"{lane}: no median decode tok/s to hold its requests against"
            out.append(Judged(Verdict.INCONCLUSIVE, [why], part=lane))
            continue
        fast = [
            (r.run, q.prompt, q.decode_tok_s)
            for r in block.runs
            for q in r.requests
            if not (q.failed or q.excluded or q.degenerate)
            if q.decode_tok_s is not None and q.decode_tok_s > params.factor * median
        ]
        metrics = {"median_decode_tok_s": median, "factor": params.factor, "above": len(fast)}
        if not fast:
            out.append(Judged(Verdict.PASS, [], metrics, part=lane))
            continue
        why = (
            f"{lane}: {len(fast)} request(s) decoded above {params.factor:g} times the lane's "
            f"median of {median:,.1f} tok/s (up to {max(v for _, _, v in fast):,.1f}: "
            + ", ".join(f"run {n} {p}" for n, p, _ in fast[:5])
            + "); they are in the medians and shown in the A/B plot"
        )
        out.append(Judged(Verdict.FAIL, [why], metrics, part=lane))
    return out
