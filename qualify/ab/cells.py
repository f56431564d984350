"""The ab stage's `qualify diff` cells (its spec's `cells`):
the candidate lane over the A/B prompt set."""

from __future__ import annotations

from qualify.ab.record import Record
from qualify.present.cells import Cell, Measure, acceptance_counts, digest, given, nums


def cells(rec: Record) -> list[Cell]:
    """The candidate lane over the A/B prompt set: per-run p50s, draft acceptance, and the
    paired answers identical to the control's (`qualify.ab.lossless`)."""
    names = ("max_tokens", "temperature", "concurrency", "level", "nonce")
    settings = given(rec.settings, names) if rec.settings else dict.fromkeys(names)
    setting = {"prompts": digest([f"{p.id}:{p.kind}" for p in rec.prompts]), **settings}
    lane = rec.lanes.get("candidate")
    runs = lane.runs if lane else []
    cell = Cell("ab", "candidate lane", setting)
    cell.measures["decode_tok_s"] = Measure(
        "tok/s", "higher", nums(r.p50.decode_tok_s for r in runs)
    )
    cell.measures["ttft_s"] = Measure("s", "lower", nums(r.p50.ttft_s for r in runs))
    cell.measures["e2e_s"] = Measure("s", "lower", nums(r.p50.e2e_s for r in runs))
    agg = nums(r.aggregate_output_tok_s for r in runs)
    if agg:
        cell.measures["aggregate_output_tok_s"] = Measure("tok/s", "higher", agg)
    out = [cell]
    acc = rec.acceptance
    if (counts := acceptance_counts(acc)) is not None and acc is not None:
        a = Cell("acceptance", "ab candidate lane", setting)
        a.measures["acceptance"] = Measure("rate", "higher", counts=counts)
        drafts = int(acc.drafts or 0)
        for i, k in enumerate(acc.accepted_per_position):
            if drafts:
                a.measures[f"position {i}"] = Measure("rate", "higher", counts=(k, drafts))
        out.append(a)
    if (ll := rec.lossless) is not None and ll.tokens:
        same = Cell("lossless", "ab paired answers", setting)
        same.measures["identical answers"] = Measure(
            "rate", "higher", counts=(ll.identical, ll.pairs)
        )
        same.measures["identical tokens"] = Measure(
            "rate", "higher", counts=(ll.tokens_before, ll.tokens)
        )
        out.append(same)
    return out
