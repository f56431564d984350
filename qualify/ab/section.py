"""The A/B stage in the decision document: a pure function of its typed record and gates; the
headline and caveats read the same record through `paired_of`, `runs_of` and `effect_text`."""

from __future__ import annotations

from pathlib import Path

from qualify.ab.record import (
    LANES,
    Acceptance,
    Energy,
    Kv,
    Lane,
    LaneEnergy,
    LaneName,
    Lossless,
    MetricRow,
    Paired,
    Record,
    Run,
)
from qualify.ab.stats import paired_summary
from qualify.ab.table import METRICS, pairs, same_in_every_request
from qualify.evidence.store import RunDir
from qualify.httpclient.timing import median
from qualify.present.cells import Cell, Measure, acceptance_rate, digest, drafted, given, nums
from qualify.present.plots import Panel, Plot
from qualify.present.record import GateOutcome
from qualify.present.sections import per_token_text, show
from qualify.present.wording import number, quantity
from qualify.records import CardWindow
from qualify.vram.section import free_text, power_text


def section(record: Record | None, gates: list[GateOutcome]) -> dict[str, object]:
    """What the template's A/B section shows."""
    r = record or Record()
    return {
        "ab": ab_rows(r),
        "ab_lanes": ab_lanes(r),
        "ab_gates": [g for g in gates if g.stage == "ab"],
        "ab_power": lane_power(r),
        "ab_gpu": lane_gpu(r),
    }


def _lanes(record: Record) -> list[tuple[str, Lane]]:
    """Each lane present, by the name its recipe gave it (else its key)."""
    return [(lane.name or k, lane) for k in LANES if (lane := record.lanes.get(k)) is not None]


def _mean_power(lane: Lane) -> dict[str, float]:
    """Per card with a reading, the mean power over the lane's runs' energy windows (J / s)."""
    joules: dict[str, float] = {}
    seconds: dict[str, float] = {}
    for run in lane.runs:
        e = run.energy or Energy()
        for gpu, card in e.cards.items():
            if card.joules is not None and e.window_s:
                joules[gpu] = joules.get(gpu, 0.0) + card.joules
                seconds[gpu] = seconds.get(gpu, 0.0) + e.window_s
    return {gpu: joules[gpu] / seconds[gpu] for gpu in sorted(joules)}


def lane_power(record: Record) -> list[dict[str, object]]:
    return [
        {"lane": name, "cards": [{"gpu": g, "watts": w} for g, w in watts.items()]}
        for name, lane in _lanes(record)
        if (watts := _mean_power(lane))
    ]


def lane_gpu(record: Record) -> dict[str, object]:
    """Per lane and card: the lowest free memory over the lane's timed runs against the house
    reserve, and the mean power (the energy windows', else the runs' own); nothing for a record
    of a build that did not mark the runs (no `gpu`)."""
    if record.gpu is None:
        return {"reserve_gib": None, "rows": []}
    reserve, rows = record.gpu.reserve_gib, []
    for name, lane in _lanes(record):
        watts = _mean_power(lane)
        by_card: dict[str, list[CardWindow]] = {}
        for run in lane.runs:
            for gpu, c in (run.gpu.cards if run.gpu is not None else {}).items():
                by_card.setdefault(gpu, []).append(c)
        for gpu, cards in sorted(by_card.items()):
            low = min((c.min_free_mib for c in cards if c.min_free_mib is not None), default=None)
            own = [c.mean_power_w for c in cards if c.mean_power_w is not None]
            power = power_text(watts.get(gpu, sum(own) / len(own) if own else None))
            free = free_text(low, reserve)
            rows.append(
                {"lane": name, "gpu": gpu, "runs": len(cards), "free": free, "power": power}
            )
    return {"reserve_gib": reserve, "rows": rows}


def plots(run: RunDir, record: Record | None, here: Path | None) -> list[Plot]:
    r = record or Record()
    return [ab_distributions(r), acceptance(r)]


METRIC_LABELS = {
    "decode_tok_s": "Per-request decode p50",
    "aggregate_output_tok_s": "Aggregate output",
    "ttfo_s": "TTFO p50",
    "ttft_s": "First-visible TTFT p50",
    "generation_s": "Generation p50",
    "e2e_s": "E2E p50",
}


SAME_FIRST = "TTFO = first-visible TTFT p50 (equal in every request)"


def runs_of(m: MetricRow) -> str:
    """How many run-level values a lane figure is the median of, in words."""
    written = m.runs.model_fields_set
    a = m.runs.candidate if "candidate" in written else None
    b = m.runs.control if "control" in written else None
    if a is None and b is None:
        return "run-level values (count not recorded)"
    n = f"{a}" if a == b else f"{a} / {b}"
    return f"{n} run-level value{'s' if a != 1 or b != 1 else ''}"


def paired_of(record: Record) -> dict[str, Paired]:
    """Per metric, the paired per-request summary as recorded, or computed now from the kept
    per-request timings (older evidence) by the same function."""
    cand, ctrl = _runs(record, "candidate"), _runs(record, "control")
    s = record.settings
    resamples, seed = ((s.bootstrap_resamples if s else 0) or 2000), ((s.seed if s else 0) or 0)
    out = {}
    for i, m in enumerate(record.metrics):
        if m.paired is not None:
            out[m.metric] = m.paired
        elif cand and ctrl:
            out[m.metric] = paired_summary(pairs(cand, ctrl, m.metric), resamples, seed + i)
    return out


def _runs(record: Record, key: LaneName) -> list[Run]:
    lane = record.lanes.get(key)
    return list(lane.runs) if lane is not None else []


def paired_text(p: Paired | None) -> str:
    """A paired summary in a few words, or "too few samples" where the interval says nothing."""
    if p is None or not p.model_fields_set:
        return "no per-request pairs recorded"
    n = f"{p.pairs} pair{'s' * (p.pairs != 1)} over {p.prompts} prompt{'s' * (p.prompts != 1)}"
    med, ci = p.median_pct, p.ci95_pct
    if p.too_few or med is None or ci is None:
        return f"too few samples ({n}): inconclusive"
    return f"{med:+.1f}% (95% interval {ci[0]:+.1f}% to {ci[1]:+.1f}%, {n})"


def effect_text(m: MetricRow, p: Paired | None) -> str:
    """The change's effect on a metric: paired, else (no pairs) the lane figures', said so."""
    if p is not None and p.model_fields_set:
        return paired_text(p)
    if m.delta_pct is None:
        return "no per-request pairs recorded"
    noise = ", within noise" if m.within_noise else ""
    return f"{m.delta_pct:+.1f}% (of the lane figures: no per-request pairs recorded{noise})"


def ab_rows(record: Record) -> dict[str, object]:
    lanes = record.lanes
    names = {k: (x.name if x is not None else "") or k for k in LANES for x in [lanes.get(k)]}
    per = paired_of(record)
    metrics = []
    every_run = [r for k in LANES for r in _runs(record, k)]
    one_first = same_in_every_request(every_run, "ttfo_s", "ttft_s")
    labels = {**METRIC_LABELS, "ttfo_s": SAME_FIRST} if one_first else METRIC_LABELS
    for m in record.metrics:
        if one_first and m.metric == "ttft_s":
            continue  # the same measure as TTFO in every request: one row, one interval
        metrics.append(
            {
                "label": labels.get(m.metric, m.metric),
                "unit": m.unit,
                "candidate": m.candidate,
                "control": m.control,
                "runs": runs_of(m),
                "effect": effect_text(m, per.get(m.metric)),
            }
        )
    first = next(iter(per.values()), None)
    control = lanes.get("control")
    return {
        "names": names,
        "variable": control.variable if control is not None else None,
        "method": (first.method if first else "") or "percentile bootstrap over prompts",
        "metrics": metrics,
        "acceptance_text": acceptance_text(record),
        "lossless_text": lossless_text(record.lossless),
        "energy_why": ab_energy_why(record),
        "excluded": [x.model_dump(exclude={"file"}) for x in record.excluded],
    }


def lossless_text(got: Lossless | None) -> str:
    """The paired answers compared token by token; empty for a record that compared none."""
    if got is None:
        return ""
    if got.why or not got.pairs:
        return f"not checked ({got.why or 'no paired answers'})."
    text = (
        f"{got.identical} of {got.pairs} paired answers identical at temperature 0; "
        f"{got.tokens_before:,} of the control's {got.tokens:,} tokens before each pair's "
        f"first divergence ({got.share or 0:.1%})"
    )
    if got.divergent:
        d = got.divergent[0]
        text += f"; first: run {d.run} prompt {d.prompt} from token {d.token} of {d.of}"
    for lane, r in (got.repeats or {}).items():
        text += f"; the {lane}'s own answers across its runs: {r.identical} of {r.pairs} identical"
    return text + "."


def draft_share(record: Record) -> str | None:
    """How much of the candidate's timed output the drafts gave (what a high acceptance rate
    over few drafts is worth), and what a candidate step costs in control steps: each engine
    step gives one token and the drafts it accepts, so steps = output - accepted (over 1:
    drafting and verifying cost more than the accepted tokens save)."""
    acc = record.acceptance or Acceptance()
    counted = [q for r in _runs(record, "candidate") for q in r.requests if not q.failed]
    tokens = sum(q.completion_tokens or 0 for q in counted)
    if acc.accepted is None or not tokens or not counted:
        return None
    text = (
        f"{acc.drafts} drafts in {len(counted)} timed requests: accepted drafts gave "
        f"{acc.accepted:,} of {tokens:,} output tokens ({100 * acc.accepted / tokens:.1f}%)"
    )
    decode = record.row("decode_tok_s")
    if tokens <= acc.accepted or decode is None or not decode.candidate or not decode.control:
        return text
    per_step, speed = tokens / (tokens - acc.accepted), decode.candidate / decode.control
    return (
        f"{text}; that is {per_step:.2f} tokens per engine step, and at {speed:.2f}x the "
        f"control's decode each step took {per_step / speed:.2f}x a control step's time"
    )


def acceptance_text(record: Record) -> str:
    """Draft acceptance from the server's counters, or why there is none."""
    acc = record.acceptance
    if acc is None:
        return "no acceptance counters were recorded."
    accepted, drafted = acc.accepted, acc.draft_tokens
    if accepted is not None and drafted is not None and drafted > 0:
        rate = f"{100 * accepted / drafted:.1f}%"
        text = f"{accepted:,} accepted of {drafted:,} drafted tokens: {rate} acceptance"
    else:
        text = "no drafted tokens were counted"
    per_draft = acc.per_draft
    if per_draft is not None:
        text += f", {per_draft:.1f} accepted tokens per draft over {acc.drafts:,} drafts"
        mean = acc.mean_length
        if mean is not None and abs(mean - per_draft - 1) < 0.01:
            text += f" ({mean:.1f} counting the bonus token)"
    elif acc.mean_length is not None:
        text += f", mean acceptance length {acc.mean_length:.2f} (server's figure)"
    if share := draft_share(record):
        text += f"; {share}"
    if per := acc.per_position:
        shown = ", ".join(f"{p:.2f}" for p in per[:8])
        more = f" (first 8 of {len(per)} positions)" if len(per) > 8 else ""
        text += f"; per position {shown}{more}"
    return text + f" (source: {acc.source or 'not recorded'})."


def _energy(lane: Lane) -> str:
    e = lane.energy or LaneEnergy()
    return per_token_text(e.j_per_output_token, e.joules, e.completion_tokens)


def ab_lanes(record: Record) -> list[dict[str, object]]:
    return [
        {
            "name": name,
            "speculation": show(lane.speculation) or "none",
            "kv": kv_text(lane.kv),
            "runs": len(lane.runs),
            "energy": _energy(lane),
        }
        for name, lane in _lanes(record)
    ]


def ab_energy_why(record: Record) -> str | None:
    """Why the lanes' energy per output token is unmeasured (said once)."""
    unmeasured = [lane.energy for _, lane in _lanes(record) if _energy(lane) == "unmeasured"]
    if not unmeasured:
        return None
    why = next((e.why for e in unmeasured if e is not None and e.why), None)
    return "this A/B recorded no energy" if why is None else why.removeprefix("unmeasured: ")


def kv_text(kv: Kv | None) -> str:
    """The KV capacity a lane's engine logged, in a few words (its gauges are usage, by
    metric name: never a token count)."""
    if kv is None or not kv.model_fields_set:
        return "not reported"
    log = kv.log
    if log.kv_tokens:
        return f"{log.kv_tokens:,.0f} tokens"
    slots, per = log.n_slots, log.n_ctx_slot
    if isinstance(slots, int) and isinstance(per, int):
        return f"{slots * per:,} tokens ({slots} slots x {per:,})"
    return "not reported"


def ab_distributions(record: Record) -> Plot:
    """Per-request decode and E2E per lane (x: lane index, jittered by a fixed spread so that
    coinciding points stay visible); the bar beside each is the lane's run-to-run spread."""
    panels = [Panel("decode (tok/s)", scatter=True), Panel("E2E (s)", scatter=True)]
    ticks = []
    for i, (name, lane) in enumerate(_lanes(record)):
        ticks.append((float(i), name))
        for panel, metric in zip(panels, ("decode_tok_s", "e2e_s"), strict=True):
            ys = [
                float(y)
                for run in lane.runs
                for q in run.requests
                if not q.failed and not q.excluded and not q.degenerate
                if (y := getattr(q, metric)) is not None
            ]
            if ys:
                jitter = (((k * 0.618034) % 1.0 - 0.5) * 0.36 for k in range(len(ys)))
                panel.series[name] = [(float(i) + j, y) for j, y in zip(jitter, ys, strict=True)]
                mid = median(ys)
                assert mid is not None
                panel.medians[name] = (float(i), mid)
            spread = getattr(lane.spread, metric)
            if spread is not None and len(spread) == 2:
                panel.bands.append((float(spread[0]), float(spread[1]), name))
    plot = Plot("ab-distributions.png", "A/B per request", "lane", panels, xticks=ticks)
    plot.missing = "no per-request timings were recorded"
    return plot


def acceptance(record: Record) -> Plot:
    """Acceptance rate by draft position, from the server's counters."""
    acc = record.acceptance or Acceptance()
    panel = Panel("accepted fraction")
    if pts := [(float(i + 1), float(p)) for i, p in enumerate(acc.per_position)]:
        panel.series["acceptance"] = pts
    drafts, drafted, accepted = acc.drafts, acc.draft_tokens, acc.accepted
    if drafts is not None:
        panel.note = (
            f"{drafts:,} drafts, {drafted or 0:,} drafted tokens, {accepted or 0:,} accepted"
            + (f"; position 1 reached by all {drafts:,}" if drafts else "")
        )
    plot = Plot("acceptance-by-position.png", "Draft acceptance", "draft position", [panel])
    plot.missing = "no per-position acceptance counters were recorded"
    return plot


def figures(ab: Record | None, gates: list[GateOutcome]) -> list[str]:
    if ab is None:  # no A/B, or it stopped before measuring (`parse_record`)
        return ["A/B: not run"]
    out = []
    m = ab.row("e2e_s")  # decode is in the outcome
    if m is not None:
        out.append(
            f"A/B E2E p50: {quantity(m.candidate, m.unit)} vs {quantity(m.control, m.unit)} "
            f"(median of {runs_of(m)}); paired: {paired_text(paired_of(ab).get('e2e_s'))}"
        )
    acc = ab.acceptance
    if acc is not None and acc.model_fields_set:
        text = f"{100 * acc.rate:.1f}%" if acc.rate is not None else "no rate"
        text += f" ({number(acc.accepted, 0)} of {number(acc.draft_tokens, 0)} drafted)"
        if (per := acc.per_draft) is not None:
            text += f", {per:.1f} accepted tokens per draft over {number(acc.drafts, 0)} drafts"
        share = draft_share(ab)
        out.append(f"acceptance: {text}" + (f"; {share}" if share else ""))
    return out


def diff_cells(rec: Record) -> list[Cell]:
    """The candidate lane over the A/B prompts: per-run p50s, acceptance, identical answers."""
    names = ("max_tokens", "temperature", "concurrency", "level", "nonce")
    settings = given(rec.settings, names) if rec.settings else dict.fromkeys(names)
    setting = {"prompts": digest([f"{p.id}:{p.kind}" for p in rec.prompts]), **settings}
    runs = _runs(rec, "candidate")
    cell = Cell("ab", "candidate lane", setting)
    for name, unit, better in METRICS:
        if name in ("decode_tok_s", "ttft_s", "e2e_s"):
            cell.measures[name] = Measure(unit, better, nums(getattr(r.p50, name) for r in runs))
    if agg := nums(r.aggregate_output_tok_s for r in runs):
        cell.measures["aggregate_output_tok_s"] = Measure("tok/s", "higher", agg)
    out = [cell]
    acc = rec.acceptance
    requests = sum(r.counted for r in runs)
    if (rate := drafted(acc, requests)) is not None and acc is not None:
        a = Cell("acceptance", "ab candidate lane", setting, {"acceptance": rate})
        drafts = int(acc.drafts or 0)
        for i, k in enumerate(acc.accepted_per_position):
            if drafts:
                a.measures[f"position {i}"] = acceptance_rate(k, drafts, requests)
        out.append(a)
    if (ll := rec.lossless) is not None and ll.tokens:
        same = {
            "identical answers": Measure("rate", "higher", counts=(ll.identical, ll.pairs)),
            "identical tokens": Measure("rate", "higher", counts=(ll.tokens_before, ll.tokens)),
        }
        out.append(Cell("lossless", "ab paired answers", setting, same))
    return out
