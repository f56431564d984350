"""The A/B's judges (`gates/ab/*.yaml`): each reads the typed record and the house `Thresholds`,
never a number from the candidate (more in `qualify.ab.plausible` and `qualify.ab.lossless`)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from qualify.ab.drive import sha_json
from qualify.ab.record import LANES, Acceptance, Lane, LaneName, MetricRow, Record, Run
from qualify.gates.files import Params
from qualify.gates.registry import Judged, judge
from qualify.gates.thresholds import Thresholds
from qualify.httpclient.timing import fidelity_verdict
from qualify.records import Verdict, worst
from qualify.serving.dialects import DIALECTS
from qualify.shown import direction, say

STAGE = "ab"
Found = list[tuple[Verdict, str]]


class PairedParams(Params):
    may_differ: list[str] = Field(
        default_factory=list,
        description="top-level request fields allowed to differ between the lanes (e.g. "
        "`model`, when the control serves the same weights under another name); every other "
        "field must be byte-identical",
    )


class SpeedParams(Params):
    metric: Literal["decode_tok_s", "e2e_s", "aggregate_output_tok_s", "ttft_s", "ttfo_s"] = Field(
        description="the metric row of the A/B table this gate judges"
    )


class NoParams(Params):
    pass


def no_lanes(data: Record) -> list[Judged] | None:
    """Inconclusive when the stage had no pair to judge (no control lane)."""
    if all(lane in data.lanes for lane in LANES):
        return None
    why = data.no_control or "the A/B ran without both lanes"
    return [Judged(Verdict.INCONCLUSIVE, [why])]


def _judged(found: Found, metrics: dict[str, object]) -> list[Judged]:
    verdict = worst([f[0] for f in found]) if found else Verdict.PASS
    return [Judged(verdict, [f[1] for f in found if f[0] is not Verdict.PASS], metrics)]


def _run_problems(lane: str, r: Run) -> Found:
    out: Found = []
    where = f"{lane} run {r.run}"
    if r.failed:
        first = r.failed[0]
        why = f"{where}: {len(r.failed)} request(s) failed ({first.prompt}: {first.why})"
        out.append((Verdict.ERROR, why))
    if r.counted == 0:
        out.append((Verdict.INCONCLUSIVE, f"{where}: no request could be counted"))
    for when, st in (("idle_before", r.idle_before), ("idle_after", r.idle_after)):
        if st.idle is None:
            why = f"{where}: {when} could not be checked (no running/waiting metrics)"
            out.append((Verdict.INCONCLUSIVE, why))
        elif not st.idle:
            why = (
                f"{where}: engine busy ({when}: running={st.running}, waiting="
                f"{st.waiting} after {st.waited_s:.1f} s)"
            )
            out.append((Verdict.INCONCLUSIVE, why))
    return out


def _sent(run: Run, skip: set[str]) -> dict[str, dict[str, str]]:
    """Per prompt, the digest of each field its request carried, minus the allowed fields."""
    return {q.prompt: {k: v for k, v in q.sent.items() if k not in skip} for q in run.requests}


def _body_problems(cand: Run | None, ctrl: Run | None, run: int, skip: set[str]) -> Found:
    if cand is None or ctrl is None:
        only = "candidate" if ctrl is None else "control"
        return [(Verdict.FAIL, f"run {run}: only the {only} ran it: nothing to pair with")]
    a, b = _sent(cand, skip), _sent(ctrl, skip)
    out: Found = []
    for lane, mine, theirs in (("candidate", a, b), ("control", b, a)):
        extra = sorted(set(mine) - set(theirs))
        if extra:
            out.append((Verdict.FAIL, f"run {run}: prompts {extra} were sent to the {lane} only"))
    for prompt in sorted(set(a) & set(b)):
        fields = sorted(
            k for k in set(a[prompt]) | set(b[prompt]) if a[prompt].get(k) != b[prompt].get(k)
        )
        if fields:
            why = f"run {run}: {prompt!r} was sent with different {', '.join(fields)} in the "
            out.append((Verdict.FAIL, why + "two lanes"))
    return out


@judge(STAGE, "ab-paired", PairedParams)
def paired(data: Record, params: PairedParams, thresholds: Thresholds) -> list[Judged]:
    """Fail when a lane ran fewer runs, the lanes' requests as sent differ in any field not in
    `may_differ` (or in which prompts were sent), or the non-speculative lane drafted; error on
    a failed request; inconclusive on an uncountable run or a busy engine."""
    if missing := no_lanes(data):
        return missing
    lanes, runs = data.lanes, data.runs
    skip = set(params.may_differ)
    found: Found = []
    for lane in LANES:
        done = lanes[lane].runs
        if len(done) != runs:
            found.append((Verdict.FAIL, f"{lane}: {len(done)} of {runs} runs ran"))
        for r in done:
            found.extend(_run_problems(lane, r))
        acc = lanes[lane].acceptance or Acceptance()
        if not lanes[lane].drafts and (acc.draft_tokens or acc.drafts or 0) > 0:
            why = f"{lane}: drafted ({acc.drafts} drafts) though its recipe has no speculative "
            found.append((Verdict.FAIL, why + "decoding: the paired variable did not hold"))
    by_run = {lane: {r.run: r for r in lanes[lane].runs} for lane in LANES}
    for n in sorted(set(by_run["candidate"]) | set(by_run["control"])):
        found.extend(_body_problems(by_run["candidate"].get(n), by_run["control"].get(n), n, skip))
    metrics = {
        "runs": runs,
        "counted_requests": sum(r.counted for lane in LANES for r in lanes[lane].runs),
        "may_differ": sorted(skip),
        "sent_digest": {
            lane: sha_json([[r.run, _sent(r, skip)] for r in lanes[lane].runs]) for lane in LANES
        },
    }
    return _judged(found, metrics)


def slowdown_pct(row: MetricRow) -> tuple[float, tuple[float, float]] | None:
    """How much slower the candidate is, in per cent (positive = slower), with its 95% interval:
    paired where the row has pairs, else from the lane figures' delta and `ci95`."""
    sign = -1.0 if row.better == "higher" else 1.0
    if row.paired is not None:
        med, ci = row.paired.median_pct, row.paired.ci95_pct
        if med is None or ci is None:
            return None
        ends = sorted(sign * float(v) for v in ci)
        return sign * float(med), (ends[0], ends[1])
    base, delta, ci = row.control, row.delta, row.ci95
    if base is None or base == 0 or delta is None or ci is None:
        return None
    ends = sorted(sign * 100.0 * v / base for v in ci)
    return sign * 100.0 * delta / base, (ends[0], ends[1])


def too_few(row: MetricRow) -> str | None:
    """Why a row's paired interval says nothing ("too few samples"), or None when it does."""
    p = row.paired
    if p is None or not p.too_few:
        return None
    return (
        f"too few samples: {p.pairs} request pair(s) over {p.prompts} prompt(s); "
        f"{p.why or 'no interval'}"
    )


@judge(STAGE, "ab-speed", SpeedParams)
def speed(data: Record, params: SpeedParams, thresholds: Thresholds) -> list[Judged]:
    """Fail when the whole paired 95% interval of the slowdown is beyond `ab_max_regression_pct`;
    inconclusive when only the median is, without an interval, or on "too few samples"."""
    if missing := no_lanes(data):
        return missing
    bound = thresholds.ab_max_regression_pct
    row = data.row(params.metric)
    if row is None:
        return [Judged(Verdict.INCONCLUSIVE, [f"no {params.metric} row in the A/B table"])]
    metrics: dict[str, object] = {
        "candidate": row.candidate,
        "control": row.control,
        "delta_pct": row.delta_pct,
        "ci95": row.ci95,
        "paired": row.paired.model_dump() if row.paired else None,
        "max_regression_pct": bound,
    }
    few = too_few(row)
    if few is not None:
        return [Judged(Verdict.INCONCLUSIVE, [f"{params.metric}: {few}: inconclusive"], metrics)]
    slow = slowdown_pct(row)
    if slow is None:
        why = (
            f"{params.metric}: no figure or no interval (runs counted: candidate "
            f"{row.runs.candidate}, control {row.runs.control}; an interval needs two runs per "
            "lane): speed cannot be judged"
        )
        return [Judged(Verdict.INCONCLUSIVE, [why], metrics)]
    median_slow, (lo, hi) = slow
    metrics.update(slowdown_pct=median_slow, slowdown_ci95_pct=[lo, hi])
    p = row.paired
    what = (
        f"paired median over {p.pairs} request pairs, {p.prompts} prompts"
        if p
        else "median of run-level figures"
    )
    # "slower" only where the whole interval says so (`qualify.shown`)
    claim = (
        f"the candidate is {median_slow:.1f}% slower than the control"
        if direction(lo, hi) == "up"
        else f"no slowdown shown (paired median {median_slow:.1f}%)"
    )
    said = f"{params.metric}: {claim} ({what}; 95% interval of the slowdown {lo:.1f}% to {hi:.1f}%)"
    if lo > bound:
        why = f"{said}: the whole interval is beyond the {bound:g}% allowed"
        return [Judged(Verdict.FAIL, [why], metrics)]
    if median_slow > bound:
        why = f"{said}: beyond the {bound:g}% allowed, but the interval reaches inside it"
        return [Judged(Verdict.INCONCLUSIVE, [why], metrics)]
    return [Judged(Verdict.PASS, [], metrics)]


@judge(STAGE, "ab-spec-speedup", NoParams)
def spec_speedup(data: Record, params: NoParams, thresholds: Thresholds) -> list[Judged]:
    """Where speculation is the variable, fail when the candidate's median decode is not faster
    than the control's by `spec_min_speedup_pct`; skipped where it is not the variable."""
    if missing := no_lanes(data):
        return missing
    cand, ctrl = data.lanes["candidate"], data.lanes["control"]
    if not cand.drafts or cand.speculation == ctrl.speculation:
        why = "speculative decoding is not the variable (the candidate does not draft, or the "
        why += "control drafts the same way)"
        return [Judged(Verdict.SKIPPED, [why])]
    need = thresholds.spec_min_speedup_pct
    row = data.row("decode_tok_s") or MetricRow(metric="decode_tok_s")
    p = row.paired
    gain = p.median_pct if p else row.delta_pct
    metrics = {
        "delta_pct": row.delta_pct,
        "paired_median_pct": p.median_pct if p else None,
        "paired_ci95_pct": p.ci95_pct if p else None,
        "ci95": row.ci95,
        "min_speedup_pct": need,
    }
    few = too_few(row)
    if few is not None and gain is not None and gain < need:
        return [Judged(Verdict.INCONCLUSIVE, [f"decode_tok_s: {few}: inconclusive"], metrics)]
    if gain is None:
        return [Judged(Verdict.INCONCLUSIVE, ["no decode figure in one of the lanes"], metrics)]
    if gain < need:
        lo, hi = (p.ci95_pct or (None, None)) if p else (None, None)
        shown = f" ({say(lo, hi, 'faster', 'slower')})" if p else ""
        why = (
            f"decode_tok_s: speculative decoding changed the "
            f"{'paired median' if p else 'median'} decode by {gain:+.1f}%{shown}, short of the "
            f"+{need:g}% speed-up required"
        )
        return [Judged(Verdict.FAIL, [why], metrics)]
    return [Judged(Verdict.PASS, [], metrics)]


def _lane_acceptance(lane: str, block: Lane, floor: float) -> tuple[Verdict, str]:
    acc = block.acceptance
    missing = [r.run for r in block.runs if r.acceptance is None]
    if acc is None:
        d = DIALECTS.get(block.engine)
        names = ", ".join(d.spec_names()) if d else "(unknown engine)"
        return Verdict.INCONCLUSIVE, (
            f"{lane}: {d.spec_missing if d else 'spec-absent'}: no speculative-decoding counters "
            f"on /metrics (looked for {names}); acceptance is unknown, not assumed"
        )
    if acc.drafts is None:
        return Verdict.INCONCLUSIVE, (
            f"{lane}: unmeasurable by this server: only {acc.source} (rate "
            f"{acc.rate}, mean length {acc.mean_length}), not a count over the timed runs"
        )
    if missing:
        return Verdict.INCONCLUSIVE, f"{lane}: no counters for runs {missing}"
    if acc.drafts == 0 or acc.draft_tokens == 0:
        return Verdict.INCONCLUSIVE, (
            f"{lane}: the server drafted nothing in {len(block.runs)} runs: there is no "
            "acceptance to measure"
        )
    if acc.rate is None:
        return Verdict.INCONCLUSIVE, (
            f"{lane}: acceptance rate unmeasurable by this server: "
            f"{acc.unmeasured or 'no draft-token count'} (mean length {acc.mean_length})"
        )
    if acc.rate < floor:
        return Verdict.FAIL, (
            f"{lane}: acceptance rate {acc.rate:.3f} is below the floor {floor:g} "
            f"({acc.accepted} of {acc.draft_tokens} draft tokens)"
        )
    return Verdict.PASS, ""


def drafting_lanes(data: Record) -> tuple[list[LaneName], list[Judged]]:
    """The lanes that draft, and what to report at once when nothing can be judged."""
    if missing := no_lanes(data):
        return [], missing
    spec = [lane for lane in LANES if data.lanes[lane].drafts]
    if not spec:
        why = "neither lane uses speculative decoding (identity.speculation.method)"
        return [], [Judged(Verdict.SKIPPED, [why])]
    return spec, []


@judge(STAGE, "ab-acceptance", NoParams)
def acceptance(data: Record, params: NoParams, thresholds: Thresholds) -> list[Judged]:
    """Fail when a drafting lane's counted acceptance rate is below `acceptance_floor`;
    inconclusive when the server's counters cannot give it; skipped when neither lane drafts."""
    spec, early = drafting_lanes(data)
    if early:
        return early
    floor = thresholds.acceptance_floor
    found = [_lane_acceptance(lane, data.lanes[lane], floor) for lane in spec]
    metrics: dict[str, object] = {"floor": floor}
    for lane in spec:
        acc = data.lanes[lane].acceptance
        metrics[lane] = acc.model_dump() if acc else None
    return _judged(found, metrics)


def _lane_draft_length(lane: str, block: Lane) -> Judged:
    pinned = int(block.speculation.draft_tokens or 0)
    acc = block.acceptance or Acceptance()
    d = DIALECTS.get(block.engine)
    shown = len(acc.accepted_per_position)
    metrics = {"pinned_draft_tokens": pinned, "counter_positions": shown}
    if d is None or d.spec_per_pos is None:
        why = f"{lane}: draft length unmeasurable by this server ({block.engine} exports "
        why += "no per-position acceptance counters)"
        return Judged(Verdict.INCONCLUSIVE, [why], metrics, part=lane)
    if not shown:
        why = f"{lane}: no {d.spec_per_pos} series over the timed runs (nothing drafted, or "
        why += "no counters): the draft length is unknown"
        return Judged(Verdict.INCONCLUSIVE, [why], metrics, part=lane)
    if shown != pinned:
        why = (
            f"{lane}: the server drafts up to {shown} tokens ({d.spec_per_pos} has {shown} "
            f"positions) but identity.speculation.draft_tokens pins {pinned}"
        )
        return Judged(Verdict.FAIL, [why], metrics, part=lane)
    return Judged(Verdict.PASS, [], metrics, part=lane)


@judge(STAGE, "ab-draft-length", NoParams)
def draft_length(data: Record, params: NoParams, thresholds: Thresholds) -> list[Judged]:
    """Per drafting lane: fail when the per-position counters' length (vLLM and llama.cpp size
    it to the maximum draft) differs from the pinned `draft_tokens`; inconclusive without it."""
    spec, early = drafting_lanes(data)
    if early:
        return early
    return [_lane_draft_length(lane, data.lanes[lane]) for lane in spec]


_FIDELITY_SHOWN = (
    "requests",
    "source",
    "n_decode",
    "decode_ratio_median",
    "n_ttft",
    "ttft_minus_server_prompt_ms_median",
    "ttft_below_server_prompt",
)


@judge(STAGE, "ab-fidelity", NoParams)
def fidelity(data: Record, params: NoParams, thresholds: Thresholds) -> list[Judged]:
    """Per lane: the client's timings against the server's own (`fidelity_verdict`, the context
    ladder's rule too), within `fidelity_decode_tolerance` and `ttft_bound_ms`."""
    if missing := no_lanes(data):
        return missing
    fid = data.fidelity
    concurrency = fid.concurrency if fid else 1
    tol = thresholds.fidelity_decode_tolerance
    out: list[Judged] = []
    for lane in LANES:
        summary = fid.lanes.get(lane) if fid else None
        if summary is None:
            out.append(Judged(Verdict.INCONCLUSIVE, ["no fidelity summary kept"], part=lane))
            continue
        bound = thresholds.ttft_bound_ms(summary.engine or "", concurrency)
        shown = summary.model_dump()
        metrics: dict[str, object] = {k: shown.get(k) for k in _FIDELITY_SHOWN}
        metrics.update(decode_tolerance=tol, ttft_bound_ms=bound, concurrency=concurrency)
        verdict, reasons = fidelity_verdict(summary, tol, bound)
        out.append(Judged(verdict, [f"{lane}: {r}" for r in reasons], metrics, part=lane))
    return out


# The advisory checks of figures the evidence itself contradicts register with these judges.
from qualify.ab import lossless as _lossless  # noqa: E402, F401
from qualify.ab import plausible as _plausible  # noqa: E402, F401
