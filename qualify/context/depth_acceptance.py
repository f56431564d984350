"""The context ladder's judge of speculative acceptance at depth, declared in
`gates/context/acceptance-depth.yaml`.

Each timed cell keeps the draft acceptance between the idle scrapes around it (`acceptance`,
the server's counter deltas: `qualify.ab.acceptance`). Per rung, the counted cells' counts are
summed; `context-acceptance-depth` gives one verdict per rung deeper than the shallowest rung
that drafted: its acceptance rate as a share of the shallowest rung's, failing under the house's
`context_min_acceptance_ratio`. An engine that drafts nothing has "no speculation" (skipped,
never a pass); a rung that drafted nothing while the shallowest did is inconclusive.
"""

from __future__ import annotations

from qualify.context.record import Record
from qualify.gates.files import Params
from qualify.gates.registry import Judged, judge
from qualify.gates.thresholds import Thresholds
from qualify.records import Verdict

STAGE = "context"


class NoParams(Params):
    pass


def rung_acceptance(data: Record) -> dict[int, tuple[int, int]]:
    """(accepted, draft tokens) per rung target over its counted cells that drafted."""
    out: dict[int, tuple[int, int]] = {}
    for row in data.rows:
        a = row.acceptance
        if row.verdict == Verdict.ERROR.value or a is None or not a.draft_tokens:
            continue
        got, tokens = out.get(row.target, (0, 0))
        out[row.target] = (got + (a.accepted or 0), tokens + a.draft_tokens)
    return out


@judge(STAGE, "context-acceptance-depth", NoParams)
def acceptance_depth(data: Record, params: NoParams, thresholds: Thresholds) -> list[Judged]:
    """Per rung deeper than the shallowest that drafted: its draft acceptance rate at least the
    house's `context_min_acceptance_ratio` of the shallowest rung's; no speculation is skipped."""
    if not any(r.acceptance is not None for r in data.rows):
        return [Judged(Verdict.SKIPPED, ["acceptance per rung not measured"])]
    counts = rung_acceptance(data)
    if not counts:
        why = "no speculation: no cell of the ladder drafted a token (server counters)"
        return [Judged(Verdict.SKIPPED, [why])]
    floor = thresholds.context_min_acceptance_ratio
    base_target = min(counts)
    base_acc, base_tok = counts[base_target]
    base = base_acc / base_tok
    out = []
    for rung in data.rungs:
        if rung.target <= base_target:
            continue
        m: dict[str, object] = {"shallowest": base_target, "shallowest_rate": base, "floor": floor}
        if rung.target not in counts:
            why = f"no counted cell at this rung drafted a token (the shallowest: {base:.3g})"
            out.append(Judged(Verdict.INCONCLUSIVE, [why], m, part=rung.part))
            continue
        acc, tok = counts[rung.target]
        rate = acc / tok
        ratio = rate / base if base else None
        m.update(rate=rate, ratio=ratio, accepted=acc, draft_tokens=tok)
        said = f"acceptance {rate:.3g} at this rung, {base:.3g} at the shallowest ({base_target})"
        verdict = Verdict.PASS
        if ratio is not None and ratio < floor:
            verdict = Verdict.FAIL
            said += f": {ratio:.0%} of it, under the floor {floor:.0%}"
            said += " (thresholds.context_min_acceptance_ratio)"
        out.append(Judged(verdict, [said], m, part=rung.part))
    if not out:
        why = f"only the shallowest rung ({base_target}) drafted: nothing deeper to compare"
        return [Judged(Verdict.INCONCLUSIVE, [why], {"shallowest": base_target})]
    return out
