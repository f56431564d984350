"""Speculation checked lossless: at temperature 0 a drafter may change speed, never the answer
(beyond the numeric effects of batched verification, which show late in an answer, if at all).
Each paired answer is identical, or diverges at a position counted in the control's stream
chunks (one token each when the control does not draft)."""

from __future__ import annotations

from bisect import bisect_right

from qualify.ab.judges import no_lanes
from qualify.ab.record import Divergence, Identical, LaneRuns, Lossless, Record
from qualify.gates.files import Params
from qualify.gates.registry import Judged, judge
from qualify.gates.thresholds import Thresholds
from qualify.httpclient.chat import ChatOutcome
from qualify.records import Verdict

Answers = dict[tuple[str, int, str], ChatOutcome]  # (lane, run, prompt) -> its answer
SNIPPET = 24


def repeats(answers: Answers, answered: set[tuple[str, int, str]]) -> dict[str, Identical]:
    """Each lane's later answers to a prompt against its first (prompts repeat with `nonce =
    false`): a control that answers two ways at temperature 0 is not deterministic."""
    out: dict[str, Identical] = {}
    for lane in sorted({k[0] for k in answered}):
        first: dict[str, str] = {}
        pairs = same = 0
        for _, run, prompt in sorted(k for k in answered if k[0] == lane):
            text = answers[(lane, run, prompt)].content
            if prompt not in first:
                first[prompt] = text
                continue
            pairs += 1
            same += text == first[prompt]
        out[lane] = Identical(pairs=pairs, identical=same)
    return out


def compare(
    answers: Answers, runs: LaneRuns, temperature: float, with_repeats: bool = False
) -> Lossless:
    """The `lossless` block of the A/B record; with `with_repeats`, each lane's own repeats."""
    if temperature != 0:
        return Lossless(why=f"sampled at temperature {temperature}: answers may differ by sampling")
    answered = {
        (lane, r.run, q.prompt)
        for lane, rs in runs.items()
        for r in rs
        for q in r.requests
        if q.failed is None
    }
    pairs = identical = tokens = before = 0
    divergent = []
    for lane, run, prompt in sorted(answered):
        if lane != "candidate" or ("control", run, prompt) not in answered:
            continue
        cand, ctrl = answers[(lane, run, prompt)], answers[("control", run, prompt)]
        pairs += 1
        tokens += len(ctrl.content_ends)
        if cand.content == ctrl.content:
            identical += 1
            before += len(ctrl.content_ends)
            continue
        a, b = cand.content, ctrl.content
        at = next(
            (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b))
        )
        d = Divergence(
            run=run,
            prompt=prompt,
            token=bisect_right(ctrl.content_ends, at),
            of=len(ctrl.content_ends),
            control=b[at : at + SNIPPET],
            candidate=a[at : at + SNIPPET],
        )
        before += d.token
        divergent.append(d)
    return Lossless(
        pairs=pairs,
        identical=identical,
        tokens=tokens,
        tokens_before=before,
        divergent=divergent,
        **({"repeats": repeats(answers, answered)} if with_repeats else {}),
    )


@judge("ab", "ab-lossless", Params)
def gate(data: Record, params: Params, thresholds: Thresholds) -> list[Judged]:
    """Fail when less than `lossless_min_share` of the control's tokens come before each
    pair's first divergence (1.0: any divergence); inconclusive when nothing was compared."""
    if missing := no_lanes(data):
        return missing
    got, floor = data.lossless, thresholds.lossless_min_share
    if got is None or got.why or not got.pairs:
        why = (got.why if got else None) or "no paired answers were compared"
        return [Judged(Verdict.INCONCLUSIVE, [why])]
    metrics: dict[str, object] = {
        "pairs": got.pairs,
        "identical": got.identical,
        "identical_token_share": got.share,
        "lossless_min_share": floor,
    }
    if (got.share or 0.0) >= floor:
        return [Judged(Verdict.PASS, [], metrics)]
    early = sorted(got.divergent, key=lambda d: d.token)
    own = (got.repeats or {}).get("control")
    if own is not None and own.identical < own.pairs:
        why = (
            f"{got.pairs - got.identical} of {got.pairs} paired answers differ, but the "
            f"control's own answers differ between its runs ({own.pairs - own.identical} "
            f"of {own.pairs} repeats): the server is not deterministic at temperature 0, "
            "so the difference cannot be laid on speculation"
        )
        more = {"control_repeats": own.pairs, "control_identical": own.identical}
        return [Judged(Verdict.INCONCLUSIVE, [why], metrics | more)]
    reasons = [
        f"{got.share or 0:.1%} of the control's {got.tokens:,} tokens before each pair's first "
        f"divergence, below {floor:.1%}; {got.pairs - got.identical} of {got.pairs} pairs differ"
    ]
    reasons += [
        f"run {d.run} prompt {d.prompt}: the answers differ from token {d.token} of {d.of} "
        f"(control {d.control!r}, candidate {d.candidate!r})"
        for d in early[:3]
    ]
    return [Judged(Verdict.FAIL, reasons, metrics)]
