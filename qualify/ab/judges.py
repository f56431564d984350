"""The A/B's judges, declared in `gates/ab/*.yaml`: each reads the stage's `data` and the house
`Thresholds`, never a number from the candidate.

- `ab-paired`: both lanes ran every run, idle, and were sent the same request bodies (as sent,
  field by field, `model` included unless the gate file lists it in `may_differ`).
- `ab-speed`: one metric (decode, E2E) per gate file: fail when the candidate is slower than
  the control by more than `ab_max_regression_pct` with the whole paired bootstrap interval
  beyond it; inconclusive when that interval is too wide to say anything ("too few samples").
- `ab-spec-speedup`: when speculative decoding is the variable, the candidate's median decode
  must be faster by at least `spec_min_speedup_pct`.
- `ab-acceptance`: every drafting lane's acceptance rate, counted over its timed runs, is at
  least `acceptance_floor`.
- `ab-draft-length`: the draft positions the server's per-position counters show equal the
  lane's pinned `identity.speculation.draft_tokens`.
- `ab-fidelity`: per lane, the client's decode and TTFT agree with the server's own figures.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal

from pydantic import Field

from qualify.gates.files import Params
from qualify.gates.registry import Judged, judge
from qualify.gates.thresholds import Thresholds
from qualify.httpclient.timing import fidelity_reasons
from qualify.records import Verdict, worst
from qualify.serving.engines import DIALECTS

__all__ = [
    "acceptance",
    "draft_length",
    "drafts",
    "fidelity",
    "paired",
    "slowdown_pct",
    "spec_speedup",
    "speed",
]

STAGE = "ab"
LANES = ("candidate", "control")
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


def drafts(block: dict[str, Any]) -> bool:
    """Whether a lane's recipe uses speculative decoding."""
    return str((block.get("speculation") or {}).get("method", "none")).lower() not in ("none", "")


def _no_lanes(data: dict[str, Any]) -> list[Judged] | None:
    """Inconclusive when the stage had no pair to judge (no control lane)."""
    lanes = data.get("lanes") or {}
    if all(lane in lanes for lane in LANES):
        return None
    why = data.get("no_control") or "the A/B ran without both lanes"
    return [Judged(Verdict.INCONCLUSIVE, [why])]


def _judged(found: Found, metrics: dict[str, Any]) -> list[Judged]:
    verdict = worst([f[0] for f in found]) if found else Verdict.PASS
    return [Judged(verdict, [f[1] for f in found if f[0] is not Verdict.PASS], metrics)]


# -- paired -------------------------------------------------------------------------------------


def _run_problems(lane: str, r: dict[str, Any]) -> Found:
    out: Found = []
    where = f"{lane} run {r['run']}"
    if r["failed"]:
        first = r["failed"][0]
        out.append(
            (
                Verdict.ERROR,
                f"{where}: {len(r['failed'])} request(s) failed "
                f"({first['prompt']}: {first['why']})",
            )
        )
    if r["counted"] == 0:
        out.append((Verdict.INCONCLUSIVE, f"{where}: no request could be counted"))
    for when in ("idle_before", "idle_after"):
        st = r[when]
        if st["idle"] is None:
            out.append(
                (
                    Verdict.INCONCLUSIVE,
                    f"{where}: {when} could not be checked (no running/waiting metrics)",
                )
            )
        elif not st["idle"]:
            out.append(
                (
                    Verdict.INCONCLUSIVE,
                    f"{where}: engine busy ({when}: running={st['running']}, waiting="
                    f"{st['waiting']} after {st['waited_s']:.1f} s)",
                )
            )
    return out


def _sent(run: dict[str, Any], skip: set[str]) -> dict[str, dict[str, str]]:
    """Per prompt, the digest of each field its request carried, minus the allowed fields."""
    return {
        q["prompt"]: {k: v for k, v in q["sent"].items() if k not in skip} for q in run["requests"]
    }


def _lane_digest(runs: list[dict[str, Any]], skip: set[str]) -> str:
    blob = json.dumps([[r["run"], _sent(r, skip)] for r in runs], sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def _body_problems(
    cand: dict[str, Any] | None, ctrl: dict[str, Any] | None, run: int, skip: set[str]
) -> Found:
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
            out.append(
                (
                    Verdict.FAIL,
                    f"run {run}: {prompt!r} was sent with different {', '.join(fields)} in the "
                    "two lanes",
                )
            )
    return out


@judge(STAGE, "ab-paired", PairedParams)
def paired(data: dict[str, Any], params: PairedParams, thresholds: Thresholds) -> list[Judged]:
    """Fail when a lane ran fewer runs, the lanes' requests as sent differ in any field not in
    `may_differ` (or in which prompts were sent), or the non-speculative lane drafted; error on
    a failed request; inconclusive on an uncountable run or a busy engine."""
    missing = _no_lanes(data)
    if missing:
        return missing
    lanes, runs = data["lanes"], int(data["runs"])
    skip = set(params.may_differ)
    found: Found = []
    for lane in LANES:
        done = lanes[lane]["runs"]
        if len(done) != runs:
            found.append((Verdict.FAIL, f"{lane}: {len(done)} of {runs} runs ran"))
        for r in done:
            found.extend(_run_problems(lane, r))
        acc = lanes[lane].get("acceptance") or {}
        if not drafts(lanes[lane]) and (acc.get("draft_tokens") or acc.get("drafts") or 0) > 0:
            found.append(
                (
                    Verdict.FAIL,
                    f"{lane}: drafted ({acc.get('drafts')} drafts) though its recipe has no "
                    "speculative decoding: the paired variable did not hold",
                )
            )
    by_run = {lane: {r["run"]: r for r in lanes[lane]["runs"]} for lane in LANES}
    for n in sorted(set(by_run["candidate"]) | set(by_run["control"])):
        found.extend(_body_problems(by_run["candidate"].get(n), by_run["control"].get(n), n, skip))
    metrics = {
        "runs": runs,
        "counted_requests": sum(r["counted"] for lane in LANES for r in lanes[lane]["runs"]),
        "may_differ": sorted(skip),
        "sent_digest": {lane: _lane_digest(lanes[lane]["runs"], skip) for lane in LANES},
    }
    return _judged(found, metrics)


# -- speed --------------------------------------------------------------------------------------


def slowdown_pct(row: dict[str, Any]) -> tuple[float, tuple[float, float]] | None:
    """How much slower the candidate is than the control, in per cent (positive = slower),
    with its 95% interval in the same terms: from the paired per-request differences when the
    row has them (`paired`), else from the delta of the lane figures and `ci95`; None without
    figures or without an interval."""
    sign = -1.0 if row.get("better") == "higher" else 1.0
    paired = row.get("paired")
    if isinstance(paired, dict):
        med, ci = paired.get("median_pct"), paired.get("ci95_pct")
        if med is None or ci is None:
            return None
        ends = sorted(sign * float(v) for v in ci)
        return sign * float(med), (ends[0], ends[1])
    base, delta, ci = row.get("control"), row.get("delta"), row.get("ci95")
    if not isinstance(base, int | float) or base == 0 or delta is None or ci is None:
        return None
    ends = sorted(sign * 100.0 * v / base for v in ci)
    return sign * 100.0 * delta / base, (ends[0], ends[1])


def too_few(row: dict[str, Any]) -> str | None:
    """Why a row's paired interval says nothing ("too few samples"), or None when it does."""
    paired = row.get("paired")
    if not isinstance(paired, dict) or not paired.get("too_few"):
        return None
    return (
        f"too few samples: {paired.get('pairs')} request pair(s) over {paired.get('prompts')} "
        f"prompt(s); {paired.get('why') or 'no interval'}"
    )


def _row(data: dict[str, Any], metric: str) -> dict[str, Any] | None:
    return next((m for m in data.get("metrics") or [] if m.get("metric") == metric), None)


@judge(STAGE, "ab-speed", SpeedParams)
def speed(data: dict[str, Any], params: SpeedParams, thresholds: Thresholds) -> list[Judged]:
    """Fail when the candidate is slower than the control by more than
    `ab_max_regression_pct` with the whole 95% interval of the paired per-request differences
    beyond that bound; inconclusive when the median is beyond it but the interval is not, when
    there is no interval, or when the interval is wider than the control's figure ("too few
    samples"); pass otherwise."""
    missing = _no_lanes(data)
    if missing:
        return missing
    bound = thresholds.ab_max_regression_pct
    row = _row(data, params.metric)
    if row is None:
        return [Judged(Verdict.INCONCLUSIVE, [f"no {params.metric} row in the A/B table"])]
    slow = slowdown_pct(row)
    metrics: dict[str, Any] = {
        "candidate": row.get("candidate"),
        "control": row.get("control"),
        "delta_pct": row.get("delta_pct"),
        "ci95": row.get("ci95"),
        "paired": row.get("paired"),
        "max_regression_pct": bound,
    }
    few = too_few(row)
    if few is not None:
        return [Judged(Verdict.INCONCLUSIVE, [f"{params.metric}: {few}: inconclusive"], metrics)]
    if slow is None:
        runs = row.get("runs") or {}
        return [
            Judged(
                Verdict.INCONCLUSIVE,
                [
                    f"{params.metric}: no figure or no interval (runs counted: candidate "
                    f"{runs.get('candidate')}, control {runs.get('control')}; an interval "
                    "needs two runs per lane): speed cannot be judged"
                ],
                metrics,
            )
        ]
    median_slow, (lo, hi) = slow
    metrics.update(slowdown_pct=median_slow, slowdown_ci95_pct=[lo, hi])
    paired = row.get("paired") if isinstance(row.get("paired"), dict) else None
    what = (
        f"paired median over {paired.get('pairs')} request pairs, {paired.get('prompts')} prompts"
        if paired
        else "median of run-level figures"
    )
    said = (
        f"{params.metric}: the candidate is {median_slow:.1f}% slower than the control "
        f"({what}; 95% interval of the slowdown {lo:.1f}% to {hi:.1f}%)"
    )
    if lo > bound:
        return [
            Judged(
                Verdict.FAIL,
                [f"{said}: the whole interval is beyond the {bound:g}% allowed"],
                metrics,
            )
        ]
    if median_slow > bound:
        return [
            Judged(
                Verdict.INCONCLUSIVE,
                [f"{said}: beyond the {bound:g}% allowed, but the interval reaches inside it"],
                metrics,
            )
        ]
    return [Judged(Verdict.PASS, [], metrics)]


@judge(STAGE, "ab-spec-speedup", NoParams)
def spec_speedup(data: dict[str, Any], params: NoParams, thresholds: Thresholds) -> list[Judged]:
    """When speculative decoding is the variable (the candidate drafts and the control's
    speculation differs), fail when the candidate's median decode is not faster than the
    control's by at least `spec_min_speedup_pct`; skipped when speculation is not the variable."""
    missing = _no_lanes(data)
    if missing:
        return missing
    cand, ctrl = data["lanes"]["candidate"], data["lanes"]["control"]
    if not drafts(cand) or cand.get("speculation") == ctrl.get("speculation"):
        why = "speculative decoding is not the variable (the candidate does not draft, or the "
        why += "control drafts the same way)"
        return [Judged(Verdict.SKIPPED, [why])]
    need = thresholds.spec_min_speedup_pct
    row = _row(data, "decode_tok_s") or {}
    paired = row.get("paired") if isinstance(row.get("paired"), dict) else None
    gain = paired.get("median_pct") if paired else row.get("delta_pct")
    metrics = {
        "delta_pct": row.get("delta_pct"),
        "paired_median_pct": paired.get("median_pct") if paired else None,
        "ci95": row.get("ci95"),
        "min_speedup_pct": need,
    }
    few = too_few(row)
    if few is not None and gain is not None and gain < need:
        return [Judged(Verdict.INCONCLUSIVE, [f"decode_tok_s: {few}: inconclusive"], metrics)]
    if gain is None:
        return [Judged(Verdict.INCONCLUSIVE, ["no decode figure in one of the lanes"], metrics)]
    if gain < need:
        return [
            Judged(
                Verdict.FAIL,
                [
                    f"decode_tok_s: speculative decoding changed the "
                    f"{'paired median' if paired else 'median'} decode by "
                    f"{gain:+.1f}%, short of the +{need:g}% speed-up required"
                ],
                metrics,
            )
        ]
    return [Judged(Verdict.PASS, [], metrics)]


# -- acceptance and draft length ----------------------------------------------------------------


def _counter_names(engine: str) -> str:
    d = DIALECTS.get(engine)
    if d is None:
        return "(unknown engine)"
    return ", ".join(d.spec_names())


def _lane_acceptance(lane: str, block: dict[str, Any], floor: float) -> tuple[Verdict, str]:
    acc = block.get("acceptance")
    missing = [r["run"] for r in block["runs"] if r.get("acceptance") is None]
    if acc is None:
        missing_name = d.spec_missing if (d := DIALECTS.get(block["engine"])) else "spec-absent"
        return Verdict.INCONCLUSIVE, (
            f"{lane}: {missing_name}: no speculative-decoding counters on /metrics (looked for "
            f"{_counter_names(block['engine'])}); acceptance is unknown, not assumed"
        )
    if acc.get("drafts") is None:
        return Verdict.INCONCLUSIVE, (
            f"{lane}: unmeasurable by this server: only {acc['source']} (rate "
            f"{acc.get('rate')}, mean length {acc.get('mean_length')}), not a count over the "
            "timed runs"
        )
    if missing:
        return Verdict.INCONCLUSIVE, f"{lane}: no counters for runs {missing}"
    if acc["drafts"] == 0 or acc.get("draft_tokens") == 0:
        return Verdict.INCONCLUSIVE, (
            f"{lane}: the server drafted nothing in {len(block['runs'])} runs: there is no "
            "acceptance to measure"
        )
    if acc.get("rate") is None:
        return Verdict.INCONCLUSIVE, (
            f"{lane}: acceptance rate unmeasurable by this server: "
            f"{acc.get('unmeasured') or 'no draft-token count'} (mean length "
            f"{acc.get('mean_length')})"
        )
    if acc["rate"] < floor:
        return Verdict.FAIL, (
            f"{lane}: acceptance rate {acc['rate']:.3f} is below the floor {floor:g} "
            f"({acc['accepted']} of {acc['draft_tokens']} draft tokens)"
        )
    return Verdict.PASS, ""


def _drafting_lanes(data: dict[str, Any]) -> tuple[dict[str, Any], list[str], list[Judged]]:
    """The lanes, those that draft, and what to report at once when nothing can be judged
    (a lane is missing: error; neither drafts: skipped)."""
    missing = _no_lanes(data)
    if missing:
        return {}, [], missing
    lanes = data["lanes"]
    spec = [lane for lane in LANES if drafts(lanes[lane])]
    if not spec:
        why = "neither lane uses speculative decoding (identity.speculation.method)"
        return lanes, [], [Judged(Verdict.SKIPPED, [why])]
    return lanes, spec, []


@judge(STAGE, "ab-acceptance", NoParams)
def acceptance(data: dict[str, Any], params: NoParams, thresholds: Thresholds) -> list[Judged]:
    """Fail when a drafting lane's acceptance rate, counted over its timed runs, is below
    `acceptance_floor`; inconclusive when the server's counters cannot give it (the reason says
    which); skipped when neither lane drafts."""
    lanes, spec, early = _drafting_lanes(data)
    if early:
        return early
    floor = thresholds.acceptance_floor
    found = [_lane_acceptance(lane, lanes[lane], floor) for lane in spec]
    metrics = {"floor": floor, **{lane: lanes[lane].get("acceptance") for lane in spec}}
    return _judged(found, metrics)


def _lane_draft_length(lane: str, block: dict[str, Any]) -> Judged:
    pinned = int((block.get("speculation") or {}).get("draft_tokens") or 0)
    acc = block.get("acceptance") or {}
    d = DIALECTS.get(str(block.get("engine")))
    shown = len(acc.get("accepted_per_position") or [])
    metrics = {"pinned_draft_tokens": pinned, "counter_positions": shown}
    if d is None or d.spec_per_pos is None:
        why = f"{lane}: draft length unmeasurable by this server ({block.get('engine')} exports "
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
def draft_length(data: dict[str, Any], params: NoParams, thresholds: Thresholds) -> list[Judged]:
    """Per drafting lane: fail when the number of draft positions the server's per-position
    counters show (the length of the per-position curve, which vLLM and llama.cpp size to the
    configured maximum draft) differs from `identity.speculation.draft_tokens`; inconclusive
    where the server has no such counters or nothing was drafted."""
    lanes, spec, early = _drafting_lanes(data)
    if early:
        return early
    return [_lane_draft_length(lane, lanes[lane]) for lane in spec]


# -- fidelity -----------------------------------------------------------------------------------


@judge(STAGE, "ab-fidelity", NoParams)
def fidelity(data: dict[str, Any], params: NoParams, thresholds: Thresholds) -> list[Judged]:
    """Per lane: fail when the client's median decode tok/s differs from the server's by more
    than `fidelity_decode_tolerance`, or TTFT minus the server's prompt time lies outside
    [0, `ttft_bound_ms(engine, concurrency)`]; inconclusive when the server reported neither."""
    missing = _no_lanes(data)
    if missing:
        return missing
    fid = data.get("fidelity") or {}
    concurrency = int(fid.get("concurrency") or 1)
    tol = thresholds.fidelity_decode_tolerance
    out: list[Judged] = []
    for lane in LANES:
        summary = (fid.get("lanes") or {}).get(lane)
        if summary is None:
            out.append(Judged(Verdict.INCONCLUSIVE, ["no fidelity summary kept"], part=lane))
            continue
        engine = str(summary.get("engine") or "")
        bound = thresholds.ttft_bound_ms(engine, concurrency)
        metrics = {
            k: summary.get(k)
            for k in (
                "requests",
                "source",
                "n_decode",
                "decode_ratio_median",
                "n_ttft",
                "ttft_minus_server_prompt_ms_median",
                "ttft_below_server_prompt",
            )
        }
        metrics.update(decode_tolerance=tol, ttft_bound_ms=bound, concurrency=concurrency)
        reasons = [f"{lane}: {r}" for r in fidelity_reasons(summary, tol, bound)]
        unseen = [
            f"{lane}: the server reported no {what} for its {summary.get('requests')} answered "
            "requests"
            for what, n in (("decode rate", "n_decode"), ("prompt time", "n_ttft"))
            if not summary.get(n)
        ]
        if reasons:
            out.append(Judged(Verdict.FAIL, reasons, metrics, part=lane))
        elif unseen:
            out.append(Judged(Verdict.INCONCLUSIVE, unseen, metrics, part=lane))
        else:
            out.append(Judged(Verdict.PASS, [], metrics, part=lane))
    return out
