"""A verified run's verdict, gate counts and headline figures as Prometheus gauges (base units
named in each metric), pushed to a Pushgateway (`prometheus_client`; docs/export.md).

Every sample carries `run_id`. The push's grouping key is the candidate and, when its `[alias]`
names one, the alias: a later run of the same candidate replaces these figures, so a rollout
tool reading `qualify_decision_promote{candidate="..."}` sees the latest qualification.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Gauge, push_to_gateway

from qualify.ab.record import Record as AbRecord
from qualify.capacity import section as capacity_section
from qualify.capacity.record import Record as CapacityRecord
from qualify.context.record import Record as ContextRecord
from qualify.context.section import context_reach
from qualify.decision import headline
from qualify.diff.runs import Side
from qualify.errors import BadInput, RunAborted
from qualify.export import alias_of
from qualify.present.reading import record_of
from qualify.present.record import DecisionRecord
from qualify.quality.record import Record as QualityRecord
from qualify.records import StageRecord, Verdict
from qualify.vram import section as vram_section
from qualify.vram.record import Record as VramRecord

MIB = 1024 * 1024


@dataclass(frozen=True)
class Sample:
    """One gauge value: its metric (units in the name), what it is, its labels."""

    name: str
    help: str
    value: float
    labels: tuple[tuple[str, str], ...] = ()


def gate_samples(record: DecisionRecord) -> Iterator[Sample]:
    """Per stage with gates, the count of each verdict (zero counts included)."""
    for stage in dict.fromkeys(g.stage for g in record.evaluation.gates):
        mine = [g.verdict for g in record.evaluation.gates if g.stage == stage]
        for v in Verdict:
            yield Sample(
                "qualify_gates",
                "gates of a stage with a verdict, as the signed decision records them",
                float(mine.count(v)),
                (("stage", stage), ("verdict", v.value)),
            )


def _ab_samples(ab: AbRecord | None) -> Iterator[Sample]:
    decode, e2e = (ab.row(m) if ab else None for m in ("decode_tok_s", "e2e_s"))
    for lane in ("candidate", "control"):
        if decode is not None and (v := getattr(decode, lane)) is not None:
            what = "A/B decode rate per request (median of run-level p50s)"
            yield Sample("qualify_ab_decode_tokens_per_second", what, v, (("lane", lane),))
        if e2e is not None and (v := getattr(e2e, lane)) is not None:
            what = "A/B end-to-end time per request (median of run-level p50s)"
            yield Sample("qualify_ab_e2e_p50_seconds", what, v, (("lane", lane),))
    if decode is not None and decode.delta_pct is not None:
        what = "A/B decode rate, candidate against control, as a ratio (0.05 is 5% faster)"
        yield Sample("qualify_ab_decode_delta_ratio", what, decode.delta_pct / 100.0)
    acc = ab.acceptance if ab else None
    if acc is not None and acc.rate is not None:
        what = "draft tokens accepted over draft tokens proposed (server counters)"
        yield Sample("qualify_ab_draft_acceptance_ratio", what, acc.rate)
    if acc is not None and (per := acc.per_draft) is not None:
        what = "accepted draft tokens per draft (the bonus token not counted)"
        yield Sample("qualify_ab_accepted_tokens_per_draft", what, per)


def _quality_samples(quality: QualityRecord | None) -> Iterator[Sample]:
    for lane, levels in (quality.totals if quality else {}).items():
        for level, outcomes in levels.items():
            for outcome, n in outcomes.items():
                labels = (("lane", lane), ("level", level), ("outcome", outcome))
                what = "quality task attempts by lane, reasoning level and outcome"
                yield Sample("qualify_quality_attempts", what, float(n), labels)


def _context_samples(ctx: ContextRecord | None) -> Iterator[Sample]:
    for p, (top, most) in context_reach(ctx).items():
        if top is not None:
            what = "the longest prompt (tokens) of a context cell that passed, per pass"
            yield Sample("qualify_context_passed_prompt_tokens", what, float(top), (("pass", p),))
        if most:  # no cell of the pass recorded its prompt's size: no figure, not zero
            what = "the longest prompt (tokens) a context cell sent, per pass"
            yield Sample("qualify_context_sent_prompt_tokens", what, float(most), (("pass", p),))


def _capacity_samples(capacity: CapacityRecord | None) -> Iterator[Sample]:
    best = capacity_section.best(capacity)
    if best is not None and best.aggregate_output_tok_s is not None:
        what = "the candidate's highest aggregate output rate of a capacity cell"
        labels = (("cell", best.cell),)
        name = "qualify_capacity_best_aggregate_output_tokens_per_second"
        yield Sample(name, what, best.aggregate_output_tok_s, labels)
    load = capacity.load if capacity is not None else None
    for c in load.replay if load else []:
        if c.goodput is not None:
            what = "share of a replayed trace's requests meeting every SLO, per scale"
            name = "qualify_capacity_replay_goodput_ratio"
            yield Sample(name, what, c.goodput, (("cell", c.cell),))
    if load is not None and load.sessions is not None and load.sessions.goodput is not None:
        what = "share of the agent sessions' turns right and within every SLO"
        yield Sample("qualify_capacity_sessions_goodput_ratio", what, load.sessions.goodput)


def _vram_samples(vram: VramRecord | None) -> Iterator[Sample]:
    cards = vram_section.card_minimums(vram)
    for c in cards:
        if c["min_free_mib"] is not None:
            what = "a card's lowest free memory over every stage"
            labels = (("gpu", str(c["gpu"])),)
            yield Sample("qualify_vram_min_free_bytes", what, c["min_free_mib"] * MIB, labels)
    if vram is not None and cards:
        what = "the free memory every card must keep (house reserve)"
        yield Sample("qualify_vram_reserve_bytes", what, vram.reserve_gib * 1024 * MIB)


def _fidelity_samples(
    records: Mapping[str, StageRecord], record: DecisionRecord
) -> Iterator[Sample]:
    for f in headline.fidelity(records, record.evaluation.gates):
        labels = (("stage", str(f["stage"])),)
        if f["decode_ratio"] is not None:
            what = "client decode rate over the server's own (median per request)"
            yield Sample("qualify_fidelity_decode_ratio", what, f["decode_ratio"], labels)
        if f["ttft_gap_ms"] is not None:
            what = "client first-token time minus the server's prompt time (median)"
            value = f["ttft_gap_ms"] / 1000.0
            yield Sample("qualify_fidelity_ttft_gap_seconds", what, value, labels)


def samples(side: Side) -> list[Sample]:
    """The verdict, the gate counts and the headline figures of a verified run."""
    rec, records = side.record, side.records
    what = "the signed decision: 1 promote, 0 no-promote"
    out = [Sample("qualify_decision_promote", what, 1.0 if rec.promote else 0.0)]
    out += gate_samples(rec)
    out += _ab_samples(record_of(records, "ab", AbRecord))
    out += _quality_samples(record_of(records, "quality", QualityRecord))
    out += _context_samples(record_of(records, "context", ContextRecord))
    out += _capacity_samples(record_of(records, "capacity", CapacityRecord))
    out += _vram_samples(record_of(records, "vram", VramRecord))
    out += _fidelity_samples(records, rec)
    return out


def registry(run_id: str, found: list[Sample]) -> CollectorRegistry:
    """One gauge per metric name, each sample labelled with its labels and `run_id`."""
    reg = CollectorRegistry()
    gauges: dict[str, Gauge] = {}
    for s in found:
        labels = dict(s.labels) | {"run_id": run_id}
        if s.name not in gauges:
            gauges[s.name] = Gauge(s.name, s.help, sorted(labels), registry=reg)
        gauges[s.name].labels(**labels).set(s.value)
    return reg


def grouping_key(side: Side) -> dict[str, str]:
    alias = alias_of(side)
    key = {"candidate": side.record.candidate}
    return key | {"alias": alias} if alias else key


def push(url: str, job: str, side: Side, found: list[Sample]) -> None:
    """Replace the group (job, candidate[, alias]) on the Pushgateway at `url`."""
    reg = registry(side.record.run_id, found)
    try:
        push_to_gateway(url, job=job, registry=reg, grouping_key=grouping_key(side), timeout=30)
    except ValueError as exc:
        raise BadInput(
            f"{url} is not a Pushgateway address",
            [f"--pushgateway: expected http(s)://HOST:PORT ({exc})"],
        ) from None
    except OSError as exc:
        raise RunAborted(f"qualify: the push to {url} failed: {exc}") from None
