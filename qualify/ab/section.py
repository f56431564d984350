"""The A/B stage in the decision document: per metric the lane figures with their run counts
and the paired per-request statistic, the lanes (speculation, KV, runs, energy per output
token), draft acceptance, excluded requests, and the plots of per-request decode and E2E per
lane and of acceptance by draft position. A pure function of the stage's record (`data`) and
its gates."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from qualify.ab.stats import paired_summary
from qualify.ab.table import pairs
from qualify.decision.plots import Panel, Plot, num
from qualify.decision.record import GateOutcome
from qualify.decision.sections import as_dict as _dict
from qualify.decision.sections import as_list as _list
from qualify.decision.sections import energy_text, show
from qualify.evidence.store import RunDir
from qualify.httpclient.timing import median

_d, _l, _num = _dict, _list, num


def section(data: dict[str, Any], gates: list[GateOutcome]) -> dict[str, Any]:
    """What the template's A/B section shows."""
    return {
        "ab": ab_rows(data),
        "ab_lanes": ab_lanes(data),
        "ab_gates": [g for g in gates if g.stage == "ab"],
        "ab_power": lane_power(data),
    }


def lane_power(data: dict[str, Any]) -> list[dict[str, Any]]:
    """Per lane and card, the mean power over the lane's timed runs (joules over seconds of
    the runs' energy windows, as the sampler integrated them); only cards with a reading."""
    out = []
    for key in ("candidate", "control"):
        lane = _d(_d(data.get("lanes")).get(key))
        joules: dict[str, float] = {}
        seconds: dict[str, float] = {}
        for run in (_d(r) for r in _l(lane.get("runs"))):
            energy = _d(run.get("energy"))
            window = _num(energy.get("window_s"))
            for gpu, card in _d(energy.get("cards")).items():
                j = _num(_d(card).get("joules"))
                if j is not None and window:
                    joules[gpu] = joules.get(gpu, 0.0) + j
                    seconds[gpu] = seconds.get(gpu, 0.0) + window
        cards = [{"gpu": gpu, "watts": joules[gpu] / seconds[gpu]} for gpu in sorted(joules)]
        if cards:
            out.append({"lane": lane.get("name") or key, "cards": cards})
    return out


def plots(run: RunDir, data: dict[str, Any], here: Path | None) -> list[Plot]:
    return [ab_distributions(data), acceptance(data)]


METRIC_LABELS = {
    "decode_tok_s": "Per-request decode p50",
    "aggregate_output_tok_s": "Aggregate output",
    "ttfo_s": "TTFO p50",
    "ttft_s": "First-visible TTFT p50",
    "generation_s": "Generation p50",
    "e2e_s": "E2E p50",
}


def runs_of(m: dict[str, Any]) -> str:
    """How many run-level values a lane figure is the median of, in words."""
    runs = _dict(m.get("runs"))
    a, b = runs.get("candidate"), runs.get("control")
    if a is None and b is None:
        return "run-level values (count not recorded)"
    n = f"{a}" if a == b else f"{a} / {b}"
    return f"{n} run-level value{'s' if a != 1 or b != 1 else ''}"


def paired(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per metric, the paired per-request summary: as the A/B stage recorded it, or computed
    now from the per-request timings it kept (older evidence), by the same function."""
    lanes = _dict(data.get("lanes"))
    cand = [_dict(r) for r in _list(_dict(lanes.get("candidate")).get("runs"))]
    ctrl = [_dict(r) for r in _list(_dict(lanes.get("control")).get("runs"))]
    settings = _dict(data.get("settings"))
    resamples = int(settings.get("bootstrap_resamples") or 2000)
    seed = int(settings.get("seed") or 0)
    out = {}
    for i, m in enumerate(_dict(x) for x in _list(data.get("metrics"))):
        name = str(m.get("metric"))
        if isinstance(m.get("paired"), dict):
            out[name] = _dict(m["paired"])
        elif cand and ctrl:
            out[name] = paired_summary(pairs(cand, ctrl, name), resamples, seed + i)
    return out


def paired_text(p: dict[str, Any] | None) -> str:
    """A paired summary in a few words: the median difference with its interval and sample
    sizes, or "too few samples" (inconclusive) when the interval says nothing."""
    if not p:
        return "no per-request pairs recorded"
    pn, kn = p.get("pairs"), p.get("prompts")
    n = f"{pn} pair{'' if pn == 1 else 's'} over {kn} prompt{'' if kn == 1 else 's'}"
    med, ci = p.get("median_pct"), p.get("ci95_pct")
    if p.get("too_few") or med is None or ci is None:
        return f"too few samples ({n}): inconclusive"
    return f"{med:+.1f}% (95% interval {ci[0]:+.1f}% to {ci[1]:+.1f}%, {n})"


def ab_rows(data: dict[str, Any]) -> dict[str, Any]:
    lanes = _dict(data.get("lanes"))
    names = {k: _dict(lanes.get(k)).get("name") or k for k in ("candidate", "control")}
    per = paired(data)
    metrics = []
    for m in (_dict(x) for x in _list(data.get("metrics"))):
        p = per.get(str(m.get("metric")))
        metrics.append(
            {
                "label": METRIC_LABELS.get(str(m.get("metric")), str(m.get("metric"))),
                "unit": str(m.get("unit") or ""),
                "better": m.get("better"),
                "candidate": m.get("candidate"),
                "control": m.get("control"),
                "delta_pct": m.get("delta_pct"),
                "within_noise": bool(m.get("within_noise")),
                "runs": runs_of(m),
                "paired": paired_text(p),
            }
        )
    excluded = [_dict(x) for x in _list(data.get("excluded"))]
    first = next(iter(per.values()), None)
    return {
        "names": names,
        "variable": _dict(lanes.get("control")).get("variable"),
        "runs": data.get("runs"),
        "pairs": first,
        "method": (first or {}).get("method") or "percentile bootstrap over prompts",
        "metrics": metrics,
        "acceptance_text": acceptance_text(data.get("acceptance"), data),
        "energy_why": ab_energy_why(data),
        "excluded": [
            {
                "lane": x.get("lane"),
                "run": x.get("run"),
                "prompt": x.get("prompt"),
                "why": x.get("why"),
            }
            for x in excluded
        ],
    }


def accepted_per_draft(acc: dict[str, Any]) -> float | None:
    """Accepted draft tokens per draft (the bonus token not counted), from the counters."""
    accepted, drafts = acc.get("accepted"), acc.get("drafts")
    if isinstance(accepted, int | float) and isinstance(drafts, int | float) and drafts > 0:
        return float(accepted) / float(drafts)
    return None


def draft_share(data: dict[str, Any]) -> str | None:
    """How much of the candidate's timed output the drafts gave: what a high acceptance rate
    over few drafts is worth."""
    acc = _dict(data.get("acceptance"))
    accepted = acc.get("accepted")
    runs = _list(_dict(_dict(data.get("lanes")).get("candidate")).get("runs"))
    reqs = [_dict(q) for r in runs for q in _list(_dict(r).get("requests"))]
    counted = [q for q in reqs if not q.get("failed")]
    tokens = sum(int(q.get("completion_tokens") or 0) for q in counted)
    if not isinstance(accepted, int) or not tokens or not counted:
        return None
    return (
        f"{acc.get('drafts')} drafts in {len(counted)} timed requests: accepted drafts gave "
        f"{accepted:,} of {tokens:,} output tokens ({100 * accepted / tokens:.1f}%)"
    )


def acceptance_text(acc: Any, data: dict[str, Any] | None = None) -> str:
    """Draft acceptance from the server's counters, or why there is none."""
    if not isinstance(acc, dict):
        return "no acceptance counters were recorded."
    accepted, drafted = acc.get("accepted"), acc.get("draft_tokens")
    if isinstance(accepted, int) and isinstance(drafted, int) and drafted > 0:
        rate = f"{100 * accepted / drafted:.1f}%"
        text = f"{accepted:,} accepted of {drafted:,} drafted tokens: {rate} acceptance"
    else:
        text = "no drafted tokens were counted"
    per_draft = accepted_per_draft(acc)
    if per_draft is not None:
        text += f", {per_draft:.1f} accepted tokens per draft over {acc['drafts']:,} drafts"
        mean = acc.get("mean_length")
        if isinstance(mean, int | float) and abs(mean - per_draft - 1) < 0.01:
            text += f" ({mean:.1f} counting the bonus token)"
    elif isinstance(acc.get("mean_length"), int | float):
        text += f", mean acceptance length {acc['mean_length']:.2f} (server's figure)"
    share = draft_share(data or {}) if data else None
    if share:
        text += f"; {share}"
    per = [p for p in _list(acc.get("per_position")) if isinstance(p, int | float)]
    if per:
        shown = ", ".join(f"{p:.2f}" for p in per[:8])
        more = f" (first 8 of {len(per)} positions)" if len(per) > 8 else ""
        text += f"; per position {shown}{more}"
    return text + f" (source: {acc.get('source') or 'not recorded'})."


def ab_lanes(data: dict[str, Any]) -> list[dict[str, Any]]:
    """Per lane: name, speculation, KV tokens as the engine reported them, excluded requests."""
    out = []
    for key in ("candidate", "control"):
        lane = _dict(_dict(data.get("lanes")).get(key))
        if not lane:
            continue
        kv = _dict(lane.get("kv"))
        out.append(
            {
                "lane": key,
                "name": lane.get("name") or key,
                "speculation": show(_dict(lane.get("speculation"))) or "none",
                "kv": kv_text(kv),
                "runs": len(_list(lane.get("runs"))),
                "energy": energy_text(_dict(lane.get("energy"))),
            }
        )
    return out


def ab_energy_why(data: dict[str, Any]) -> str | None:
    """Why a lane's energy per output token is unmeasured (said once for both lanes)."""
    lanes = [_dict(_dict(data.get("lanes")).get(k)) for k in ("candidate", "control")]
    unmeasured = [_dict(x.get("energy")) for x in lanes if x]
    unmeasured = [e for e in unmeasured if energy_text(e) == "unmeasured"]
    if not unmeasured:
        return None
    why = next((str(e["why"]) for e in unmeasured if e.get("why")), None)
    return "this A/B recorded no energy" if why is None else why.removeprefix("unmeasured: ")


def kv_text(kv: dict[str, Any]) -> str:
    """The KV capacity a lane's engine reported, in a few words."""
    if not kv:
        return "not reported"
    for src in (_dict(kv.get("gauges")), _dict(kv.get("log")), kv):
        tokens = src.get("kv_tokens") or src.get("tokens")
        if isinstance(tokens, int | float):
            return f"{tokens:,.0f} tokens"
        slots, per = src.get("n_slots"), src.get("n_ctx_slot")
        if isinstance(slots, int) and isinstance(per, int):
            return f"{slots * per:,} tokens ({slots} slots x {per:,})"
    return "not reported"


def interval(m: dict[str, Any]) -> str:
    """The 95% interval of a delta, in the metric's unit, or why there is none."""
    ci = _list(m.get("ci95"))
    if len(ci) != 2 or not all(isinstance(x, int | float) for x in ci):
        return "none"
    unit = str(m.get("unit") or "")
    if unit == "s":
        return f"{ci[0] * 1000:+,.0f} to {ci[1] * 1000:+,.0f} ms"
    return f"{ci[0]:+,.1f} to {ci[1]:+,.1f} {unit}".rstrip()


def ab_distributions(ab: dict[str, Any]) -> Plot:
    """Per-request decode and E2E per lane (x: lane index); the bar beside each lane is the
    run-to-run spread of the lane's figure (min and max of the run-level p50s)."""
    lanes = _d(ab.get("lanes"))
    panels = [Panel("decode (tok/s)", scatter=True), Panel("E2E (s)", scatter=True)]
    ticks = []
    for i, lane in enumerate(k for k in ("candidate", "control") if k in lanes):
        info = _d(lanes[lane])
        name = str(info.get("name") or lane)
        ticks.append((float(i), name))
        for panel, key in zip(panels, ("decode_tok_s", "e2e_s"), strict=True):
            ys = [
                y
                for run in (_d(r) for r in _l(info.get("runs")))
                for q in (_d(x) for x in _l(run.get("requests")))
                if not q.get("failed") and not q.get("excluded") and not q.get("degenerate")
                if (y := _num(q.get(key))) is not None
            ]
            if ys:
                panel.series[name] = [(float(i) + _jitter(k), y) for k, y in enumerate(ys)]
                mid = median(ys)
                assert mid is not None
                panel.medians[name] = (float(i), mid)
            spread = _l(_d(info.get("spread")).get(key))
            if len(spread) == 2 and all(_num(s) is not None for s in spread):
                panel.bands.append((float(spread[0]), float(spread[1]), name))
    plot = Plot("ab-distributions.png", "A/B per request", "lane", panels, xticks=ticks)
    plot.missing = "no per-request timings were recorded"
    return plot


def _jitter(k: int) -> float:
    """A fixed spread across the lane's column, so points that coincide stay visible."""
    return ((k * 0.618034) % 1.0 - 0.5) * 0.36


def acceptance(ab: dict[str, Any]) -> Plot:
    """Acceptance rate by draft position, from the server's counters."""
    per = [_num(p) for p in _l(_d(ab.get("acceptance")).get("per_position"))]
    panel = Panel("accepted fraction")
    pts = [(float(i + 1), p) for i, p in enumerate(per) if p is not None]
    if pts:
        panel.series["acceptance"] = pts
    acc = _d(ab.get("acceptance"))
    drafts, drafted, accepted = acc.get("drafts"), acc.get("draft_tokens"), acc.get("accepted")
    if isinstance(drafts, int):
        panel.note = (
            f"{drafts:,} drafts, {drafted or 0:,} drafted tokens, {accepted or 0:,} accepted"
            + (f"; position 1 reached by all {drafts:,}" if drafts else "")
        )
    plot = Plot("acceptance-by-position.png", "Draft acceptance", "draft position", [panel])
    plot.missing = "no per-position acceptance counters were recorded"
    return plot
