"""Draft acceptance from the server's own counters, read before and after each timed run. Over
the counter deltas of one run (vLLM `v1/spec_decode/metrics.py`; llama.cpp's names carry the
`llamacpp:` prefix): rate = Δaccepted_tokens / Δdraft_tokens; mean acceptance length = 1 +
Δaccepted_tokens / Δdrafts (the +1 is the bonus token); rate[i] = Δaccepted_per_pos{position=i}
/ Δdrafts.

SGLang (REFERENCE.md §4) has no such draft counters; two counters give the figures of its own
per-request stats (`spec_accept_length = completion_tokens / spec_verify_ct`): drafts = Δverify
calls (`sglang:spec_verify_calls_total`, one per draft); mean length = Δgenerated tokens / Δverify
calls (bonus, and like SGLang's each request's first, prefilled token, included); accepted =
Δgenerated − Δverify calls; draft tokens = Δverify calls × (n − 1), n the gauge
`sglang:spec_num_draft_tokens` (the verified token included), without which the rate is
unmeasurable by the server. Where only its recent-batch gauges exist (`sglang:spec_accept_rate`,
`sglang:spec_accept_length`), they are recorded as read after the run, marked: not a delta.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import zip_longest

from qualify.ab.record import Acceptance, ResponseDrafts
from qualify.httpclient.chat import ChatOutcome
from qualify.serving.dialects import Dialect, MetricsSnapshot

SGLANG_VERIFY = "sglang:spec_verify_calls_total"
SGLANG_GENERATED = "sglang:generation_tokens_total"
SGLANG_WIDTH = "sglang:spec_num_draft_tokens"


@dataclass
class SpecCounters:
    """The speculative-decoding counters of one scrape, None where the engine has none."""

    drafts: float | None = None
    draft_tokens: float | None = None
    accepted: float | None = None
    per_pos: dict[int, float] = field(default_factory=dict)
    gauges: dict[str, float] = field(default_factory=dict)
    verify_calls: float | None = None
    generated: float | None = None

    @classmethod
    def read(cls, snap: MetricsSnapshot, d: Dialect) -> SpecCounters:
        out = cls()
        if d.spec_drafts and d.spec_draft_tokens and d.spec_accepted:
            out.drafts = snap.total(d.spec_drafts)
            out.draft_tokens = snap.total(d.spec_draft_tokens)
            out.accepted = snap.total(d.spec_accepted)
        if d.spec_per_pos:
            for pos, value in snap.by_label(d.spec_per_pos, "position").items():
                if pos.isdigit():
                    out.per_pos[int(pos)] = value
        # last-batch gauges: the mean over ranks, never a sum
        names = (*d.spec_gauges, *((d.spec_width,) if d.spec_width else ()))
        out.gauges = {n: v for n in names if (v := d.read(snap, n)) is not None}
        if d.spec_verify_calls and d.generated:
            out.verify_calls = snap.total(d.spec_verify_calls)
            out.generated = snap.total(d.generated[0])
        return out

    @property
    def counted(self) -> bool:
        return None not in (self.drafts, self.draft_tokens, self.accepted)


def _rates(
    drafts: int, tokens: int | None, accepted: int, per_pos: list[int], **more: str | None
) -> Acceptance:
    return Acceptance(
        rate=accepted / tokens if tokens else None,
        mean_length=1.0 + accepted / drafts if drafts > 0 else None,
        per_position=[a / drafts for a in per_pos] if drafts > 0 else [],
        drafts=drafts,
        draft_tokens=tokens,
        accepted=accepted,
        accepted_per_position=per_pos,
        **more,
    )


def between(
    before: MetricsSnapshot | None, after: MetricsSnapshot | None, d: Dialect
) -> dict[str, object] | None:
    """`acceptance` between two scrapes of the engine's counters, None without both; its JSON
    form, which the capacity stage's dict runs keep."""
    if before is None or after is None:
        return None
    got = acceptance(SpecCounters.read(before, d), SpecCounters.read(after, d), d.name)
    return got.model_dump() if got is not None else None


def acceptance(before: SpecCounters, after: SpecCounters, engine: str) -> Acceptance | None:
    """Acceptance over one run from two scrapes; None when the engine reports nothing."""
    if before.counted and after.counted:
        names = ("drafts", "draft_tokens", "accepted")
        drafts, tokens, accepted = (round(getattr(after, k) - getattr(before, k)) for k in names)
        if min(drafts, tokens, accepted) < 0:
            # A counter went down: the server restarted between the scrapes.
            return None
        top = max([*before.per_pos, *after.per_pos], default=-1)
        per_pos = [
            round(after.per_pos.get(i, 0.0) - before.per_pos.get(i, 0.0)) for i in range(top + 1)
        ]
        return _rates(
            drafts, tokens, accepted, per_pos, source=f"{engine} counters, delta over the run"
        )
    if before.verify_calls is not None and after.verify_calls is not None:
        return _sglang(before, after, engine)
    if after.gauges:
        return Acceptance(
            rate=after.gauges.get("sglang:spec_accept_rate"),
            mean_length=after.gauges.get("sglang:spec_accept_length"),
            per_position=[],
            accepted_per_position=[],
            **dict.fromkeys(("drafts", "draft_tokens", "accepted")),  # written: none counted
            source=f"{engine} gauges read after the run (recent batches only, not a delta)",
        )
    return None


def _sglang(before: SpecCounters, after: SpecCounters, engine: str) -> Acceptance | None:
    """SGLang's acceptance from its verify-call and generated-token counters (see above)."""
    if before.generated is None or after.generated is None:
        return None
    steps, generated = (
        round(getattr(after, k) - getattr(before, k)) for k in ("verify_calls", "generated")
    )
    if min(steps, generated) < 0:
        return None
    accepted = max(0, generated - steps) if steps else 0
    width = after.gauges.get(SGLANG_WIDTH)
    tokens = steps * (round(width) - 1) if width is not None and width > 1 else None
    source = f"{engine} counters ({SGLANG_VERIFY}, {SGLANG_GENERATED}), delta over the run"
    if tokens is not None:
        return _rates(steps, tokens, accepted, [], source=source)
    why = f"no {SGLANG_WIDTH} gauge: the draft tokens per verify call, so the rate, are "
    return _rates(
        steps, None, accepted, [], source=source, unmeasured=why + "unmeasurable by this server"
    )


def combined(runs: list[Acceptance | None]) -> Acceptance | None:
    """A lane's acceptance over all its runs: counts summed, rates from the sums."""
    counted = [r for r in runs if r is not None and r.drafts is not None]
    if not counted:
        gauges = [r for r in runs if r is not None]
        return gauges[-1] if gauges else None
    positions = zip_longest(*(r.accepted_per_position for r in counted), fillvalue=0)
    tokens = [r.draft_tokens for r in counted]
    known = [t for t in tokens if t is not None]
    unmeasured = next((r.unmeasured for r in counted if r.unmeasured), None)
    n = len(counted)
    span = f"{n} runs" if n == len(runs) else f"{n} of {len(runs)} runs"
    return _rates(
        sum(r.drafts or 0 for r in counted),  # not None: counted
        None if len(known) < len(tokens) else sum(known),
        sum(r.accepted or 0 for r in counted),  # written with drafts
        [sum(at) for at in positions],
        **({"unmeasured": unmeasured} if unmeasured else {}),
        source=counted[0].source.replace("the run", span),
    )


def response_drafts(outcomes: list[ChatOutcome]) -> ResponseDrafts:
    """The per-response cross-check: `timings.draft_n` / `draft_n_accepted` summed (llama.cpp)."""
    timings = [o.timings for o in outcomes if o.timings is not None]
    drafted = [v for t in timings if isinstance(v := t.get("draft_n"), int)]
    a = sum(v for t in timings if isinstance(v := t.get("draft_n_accepted"), int))
    n, reported = sum(drafted), len(drafted)
    return ResponseDrafts(
        responses=len(outcomes),
        responses_with_drafts=reported,
        draft_n=n if reported else None,
        draft_n_accepted=a if reported else None,
        rate=a / n if n else None,
    )
