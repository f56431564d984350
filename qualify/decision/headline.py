"""The decision's first screen in words: the outcome, the headline figures, the alias it gates,
the closing paragraph, and, for a run that judged nothing, why not."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import TypedDict

from qualify.ab import section as ab_section
from qualify.ab.record import Fidelity as LanesFidelity
from qualify.ab.record import Record as AbRecord
from qualify.decision import causes
from qualify.decision.alias_view import AliasView
from qualify.decision.blockers import FIRST_SCREEN_CAUSES, exit_text
from qualify.decision.derive import NOT_QUALIFIED, stop_reason
from qualify.evidence.store import RunDir
from qualify.httpclient.timing import FidelitySummary
from qualify.present.reading import RunView
from qualify.present.record import DecisionRecord, GateOutcome, StageOutcome
from qualify.present.wording import LINE_MAX, number, quantity, short
from qualify.records import StageRecord, Verdict
from qualify.registry import led, stage_names


def figures(
    records: Mapping[str, StageRecord], gates: list[GateOutcome], fid: list[Fidelity]
) -> list[str]:
    """The headline figures, one short line each: each stage's own (its spec's `figures`, handed
    its typed record, None when it has none, and the gates; the `lead` stage's first), then
    fidelity (`fidelity`'s)."""
    out = []
    for spec in led():
        if spec.loaded.figures is not None:
            out += spec.loaded.figures(records.get(spec.name), gates)
    if fid:
        out.append(
            "fidelity (client against server, median): "
            + "; ".join(
                f"{f['stage']} decode ratio {number(f['decode_ratio'], 3)}, TTFT gap "
                f"{quantity(f['ttft_gap_ms'], 'ms')}"
                + (f" ({f['ttft_lane']})" if f.get("ttft_lane") else "")
                + f" ({f['verdict']})"
                for f in fid
            )
        )
    return out


def scope(record: DecisionRecord, stages: Mapping[str, StageOutcome]) -> str:
    """What the evidence covers, in one line: the stages that ran (preflight with the reasoning
    levels each lane ran it at), and those that did not, with why."""
    ran = [name for name in stage_names() if name in stages and stages[name].ran]
    cand, ctrl = preflight_levels(record.evaluation.gates)
    shown = []
    for name in ran:
        if name == "preflight" and cand:
            theirs = f"; the control at {', '.join(ctrl)}" if ctrl else "; the control at none"
            name += f" ({', '.join(cand)}{theirs})"
        shown.append(name)
    out = f"Evidence: {', '.join(shown) or 'no stage ran'}"
    why: dict[str, list[str]] = {}
    for n in (n for n in stage_names() if n not in ran):
        why.setdefault((stages[n].why_not if n in stages else None) or "not run", []).append(n)
    gone = "; ".join(f"{', '.join(names)} ({reason})" for reason, names in why.items())
    return out + (f"; not run: {gone}." if gone else "; every stage ran.")


def preflight_levels(gates: list[GateOutcome]) -> tuple[list[str], list[str]]:
    """The reasoning levels the candidate ran preflight at, and those its control ran it at."""
    cand = [g.level for g in gates if g.stage == "preflight" and g.level]
    ctrl = [
        g.level
        for g in gates
        if g.stage == "quality" and g.gate.startswith("control-preflight-") and g.level
    ]
    return list(dict.fromkeys(cand)), list(dict.fromkeys(ctrl))


def outcome(
    record: DecisionRecord, ab: AbRecord | None, groups: list[causes.Cause]
) -> dict[str, str]:
    """The outcome in words: verdict, what the change is, the A/B result for the candidate's
    change (`ab`, None when the run has no A/B record), the causes."""
    lane = ab.lanes.get("control") if ab is not None else None
    control = ((lane.name if lane else "") or "control") if ab is not None and ab.lanes else None
    variable = causes.variable_of(ab.lanes if ab is not None else {})
    named = "what its control names: "
    if not control:
        change = f"{record.candidate} has no A/B control in this run"
    elif variable.startswith(named):
        change = (
            f"{record.candidate} against its control `{control}` ({variable.removeprefix(named)})"
        )
    else:
        change = f"{record.candidate} changes {variable} against its control `{control}`"
    m = ab.row("decode_tok_s") if ab is not None else None
    if ab is None or m is None:
        result = "no A/B ran, so the change was not measured against its control"
    else:
        p = ab_section.paired_of(ab).get("decode_tok_s")
        drafts = ab.acceptance.drafts if ab.acceptance is not None else None
        result = (
            f"decode {quantity(m.candidate, 'tok/s')} against {quantity(m.control, 'tok/s')} "
            f"(median of {ab_section.runs_of(m)}); the change's effect: "
            f"{ab_section.effect_text(m, p)}"
        ) + (f"; {drafts:,} drafts" if isinstance(drafts, int) else "")
    verdict = "Promote" if record.promote else "No-promote"
    if record.promote and record.evaluation.waived:
        verdict = f"Promote with {len(record.evaluation.waived)} waiver(s)"
    gates = sum(len(c.keys) for c in groups)
    tags = ", ".join(f"{n} {label}" for label, n in Counter(c.label for c in groups).items())
    why = (
        f"{gates} blocking item(s) come down to {len(groups)} cause(s): {tags}."
        if groups
        else "Nothing blocks."
    )
    return {
        "text": f"**{verdict}.** {change}: {result}. {why}",
        "next": groups[0].action if groups else exit_text(record, groups),
        "variable": variable,
    }


class NotQualified(TypedDict):
    cause: str
    lines: list[str]
    log: str | None
    stages: str


class Fidelity(TypedDict):
    """A timed stage's fidelity as the document and the exported metrics show it."""

    stage: str
    n: int | None
    decode_ratio: float | None
    ttft_gap_ms: float | None
    ttft_lane: str | None
    chunk_error_pct: float | None
    chunk_lane: str | None
    verdict: str


_LOG = re.compile(r"; log: ([^;]+)")
_QUOTED = re.compile(r"«(.*?)»")


def not_qualified(run: RunDir, record: DecisionRecord) -> NotQualified | None:
    """For a run that judged nothing: the cause said once, the server's last log lines, the
    log's link (inside the run), and what each planned stage did."""
    if not record.headline.startswith(NOT_QUALIFIED):
        return None
    reason = stop_reason(record.evaluation) or ""
    log = _LOG.search(reason)
    rel = log.group(1).strip() if log else None
    if rel and Path(rel).is_absolute():
        try:
            rel = Path(rel).resolve().relative_to(run.path.resolve()).as_posix()
        except ValueError:
            rel = None
    link = rel if rel and (run.path / rel).is_file() else None
    found = (
        sorted(d.glob("stderr.*.log"))
        for lane in ("candidate", "control")
        for d in reversed(run.attempt_dirs(f"server-{lane}"))
    )
    link = link or next((x[-1].relative_to(run.path).as_posix() for x in found if x), None)
    stages = []  # `aborted` for the stage the run stopped in, `not run` for those after it
    for s in record.evaluation.stages:
        if not s.planned:
            continue
        said = [r for a in s.superseded for r in a.reasons]
        aborted = any(a.status == "aborted" for a in s.superseded)
        stopped = aborted and not all(r.startswith("not run:") for r in said)
        stages.append(f"{s.stage} ({'aborted' if stopped else 'not run'})")
    return {
        "cause": reason.split(";", 1)[0].strip() if reason else "no stage reached a judged gate",
        "lines": [short(x, LINE_MAX) for x in _QUOTED.findall(reason)],
        "log": link,
        "stages": ", ".join(stages) or "none planned",
    }


def context(
    view: RunView,
    record: DecisionRecord,
    gated: AliasView,
    stages: Mapping[str, StageOutcome],
    ab: AbRecord | None,
    groups: list[causes.Cause],
) -> dict[str, object]:
    """The first screen's words, and the closing paragraph in the seed report's shape: what to
    do with the recipe, until when, and what happens to the alias it gates (`gated`)."""
    alias, nq, records = gated.text, not_qualified(view.run, record), view.records()
    if nq is not None:
        closing = (
            f"Nothing was decided about {record.candidate}: the run stopped before any stage "
            f"judged it ({nq['cause']}). Fix that and run it again; this decision {alias}, "
            "and it does not move."
        )
    elif record.promote:
        closing = (
            f"Promote {record.candidate}: this decision {alias}; `qualify alias set` may point it "
            f"at this run under policy {record.policy_sha256[:16]}. {exit_text(record, groups)}"
        )
    else:
        titles = "; ".join(f"{c.title} ({c.label})" for c in groups[:FIRST_SCREEN_CAUSES])
        closing = (
            f"Keep {record.candidate} no-promote until a fresh run clears {len(groups)} cause(s): "
            f"{titles}; or until the house policy is reviewed and changed before a run, never "
            f"after seeing this result. This decision {alias}; it does not move."
        )
    s, gates = gated.summary, record.evaluation.gates
    fid = fidelity(records, gates)
    return {
        "nq": nq,
        "alias": alias,
        # the diff's summary against the alias's current recipe, when there is one to show
        "against": {"name": gated.name, **s} if s else None,
        "figures": figures(records, gates, fid),
        "scope": scope(record, stages),
        "outcome": outcome(record, ab, groups),
        "decision": closing,
        "fidelity": fid,
    }


def fidelity(records: Mapping[str, StageRecord], gates: list[GateOutcome]) -> list[Fidelity]:
    """Per timed stage: how far the client's timings are from the server's own, the verdict of
    the stage's fidelity gates (both halves: decode and TTFT), and the chunk-counting error of
    the lane farthest from zero, sign kept."""
    out: list[Fidelity] = []
    for stage in stage_names():  # the timed stages are the ones whose record has fidelity
        f = getattr(records.get(stage), "fidelity", None)
        if not isinstance(f, FidelitySummary) or not f.model_fields_set:
            continue
        lanes = f.lanes if isinstance(f, LanesFidelity) else {}
        chunk = {
            lane: e for lane, v in lanes.items() if (e := v.chunk_counting_error_pct) is not None
        }
        worst_lane = max(chunk, key=lambda k: abs(chunk[k]), default=None)
        gaps = {
            lane: g
            for lane, v in lanes.items()
            if (g := v.ttft_minus_server_prompt_ms_median) is not None
        }
        gap_lane = max(gaps, key=lambda k: gaps[k], default=None)
        mine = [g for g in gates if g.stage == stage and "fidelity" in g.gate]
        bad = ", ".join(
            f"`{g.key}` {g.verdict.value}" for g in mine if g.verdict is not Verdict.PASS
        )
        out.append(
            {
                "stage": stage,
                "n": f.n if "n" in f.model_fields_set else None,
                "decode_ratio": f.decode_ratio_median,
                "ttft_gap_ms": gaps[gap_lane] if gap_lane else f.ttft_minus_server_prompt_ms_median,
                "ttft_lane": gap_lane,
                "chunk_error_pct": chunk[worst_lane] if worst_lane else None,
                "chunk_lane": worst_lane,
                "verdict": (bad or "pass") if mine else "no gate",
            }
        )
    return out
