"""The caveats a reviewer weighs the figures with: the candidate's provenance, pins the server
does not report, the servers' warnings, the model's fitness, scaled budgets, sample sizes,
advisory gates and waivers."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from qualify.ab import section as ab_section
from qualify.ab.record import Record as AbRecord
from qualify.decision.headline import preflight_levels
from qualify.identity.record import Record as IdentityRecord
from qualify.present.cells import given
from qualify.present.reading import RunView, record_of
from qualify.present.record import DecisionRecord, GateOutcome
from qualify.present.sections import as_dict
from qualify.present.wording import UP, Once, reason_parts, short
from qualify.quality.record import Record as QualityRecord
from qualify.records import StageRecord, Verdict
from qualify.registry import probe_stages


def caveats(view: RunView, record: DecisionRecord, once: Once) -> list[str]:
    """Every caveat, in the order the document lists them."""
    info, records, out = view.info, view.records(), []
    git = as_dict(info.get("git"))
    if git.get("dirty"):
        out.append(
            "The repository holding the candidate had uncommitted changes at run time"
            + (", the candidate file among them." if git.get("file_dirty") else ".")
        )
    elif git.get("file_dirty"):
        out.append("The candidate file itself differed from its committed version.")
    if git and git.get("commit") is None:
        out.append("The candidate was not in a git repository with a commit.")
    identity = record_of(records, "identity", IdentityRecord)
    unreported = identity.not_reported if identity is not None else []
    blocking = {g.key for g in record.evaluation.gates if g.status in ("blocks", "vetoes")}
    unreported = [u for u in unreported if f"identity/pin@{u}" not in blocking]
    if unreported:
        names = ", ".join(unreported)
        out.append(f"Declared, not verified (the server does not report them): {names}.")
    out += _substance(view.run.path, record, records)
    if record.unsealed:
        out.append("Attempts open at decision time are not covered: " + ", ".join(record.unsealed))
    # advisory gates that did not pass: the parts of one gate that said the same thing (every
    # cell's `capacity/energy` unmeasured for one reason) are one line
    alike: dict[tuple[str, str, str], list[GateOutcome]] = {}
    for g in record.evaluation.gates:
        if g.status == "advisory" and g.verdict is not Verdict.PASS:
            base = f"{g.stage}/{g.gate.split('@', 1)[0]}"
            alike.setdefault((base, g.verdict.value, "".join(reason_parts(g))), []).append(g)
    for (base, verdict, _), gates in alike.items():
        count, text = reason_parts(gates[0])
        key = gates[0].key if len(gates) == 1 else f"{base}@*"
        parts = ", ".join(g.key.removeprefix(base).lstrip("@") for g in gates)
        at = "" if len(gates) == 1 else f" at {len(gates)} parts ({parts})"
        out.append(f"Advisory `{key}` {verdict}{at}: {count}{once.say(text, key)}")
    out += [
        f"Waived, not passed: {w.gate} by {w.signer} (key {str(w.signer_keyid)[:16]}), "
        f"ticket {w.ticket}, until {w.expires}."
        for w in record.waivers
        if w.accepted and w.gate in record.evaluation.waived
    ]
    out += [
        f"Waiver {w.path} not accepted: {short(w.why)}." for w in record.waivers if not w.accepted
    ]
    return out


_PER_REQUEST = re.compile(r"\btask \d+|\bid +\d+ \|")
_WEIGHTY = re.compile(r"context|capp|exceed|overflow|memory|fall(?:s|ing)? ?back|offload", re.I)
_WARNING = re.compile(r"^\S+ W (.*)$|^(?:.*\b)?(WARNING|Warning)[: ](.*)$")


@dataclass
class ServerWarning:
    """A warning a lane's servers wrote: in how many of its starts, and its first log."""

    lane: str
    text: str
    log: str  # relative to the run
    starts: int
    of: int


def server_warnings(run_path: Path) -> list[ServerWarning]:
    """Distinct warnings the servers wrote to their logs (llama.cpp's ` W ` lines, `WARNING`
    lines of other engines), each with the lane, how many starts said it and its first log."""
    found: dict[tuple[str, str], tuple[str, set[str], Path]] = {}
    for lane in ("candidate", "control"):
        for d in sorted((run_path).glob(f"server-{lane}/attempt-*")):
            for log in sorted(d.glob("std*.log")):
                try:
                    lines = log.read_text(errors="replace").splitlines()
                except OSError:
                    continue
                for line in lines:
                    m = _WARNING.match(line.strip())
                    if not m:
                        continue
                    text = " ".join((m.group(1) or m.group(3) or "").split())
                    if not text or _PER_REQUEST.search(text):
                        continue
                    like = (lane, re.sub(r"\d+(?:\.\d+)?", "N", text))
                    found.setdefault(like, (text, set(), log))[1].add(d.name)
    out = [
        ServerWarning(
            lane,
            text,
            log.relative_to(run_path).as_posix(),
            len(starts),
            len({d.name for d in run_path.glob(f"server-{lane}/attempt-*")}),
        )
        for (lane, _), (text, starts, log) in found.items()
    ]
    out = [w for w in out if _WEIGHTY.search(w.text) or w.starts == w.of]
    out.sort(key=lambda w: (not _WEIGHTY.search(w.text), w.lane != "candidate"))
    merged: dict[str, ServerWarning] = {}
    for w in out:  # the same warning from both lanes is one caveat
        key = re.sub(r"\d+(?:\.\d+)?", "N", w.text)
        if key in merged:
            had = merged[key]
            had.lane = f"{had.lane} and {w.lane}"
            had.starts += w.starts
            had.of += w.of
        else:
            merged[key] = w
    return list(merged.values())[:2]


def _substance(
    run_path: Path, record: DecisionRecord, records: Mapping[str, StageRecord]
) -> list[str]:
    """Caveats a reviewer needs to weigh the figures: what the servers warned about, whether
    the model is fit for the tasks at all, scaled budgets, and the sample sizes."""
    out = [
        f"The {w.lane} server{'s' if ' and ' in w.lane else ''} warned in {w.starts} of {w.of} "
        f"starts: «{short(w.text, 140)}» ([log]({UP}{w.log}))."
        for w in server_warnings(run_path)
    ]
    gates = record.evaluation.gates
    fit = [g for g in gates if g.stage in probe_stages()]
    failed = [g for g in fit if g.verdict is not Verdict.PASS]
    control = [g for g in failed if g.gate.startswith("control-")]
    if fit and len(failed) * 2 > len(fit):
        both = " on both lanes" if control else ""
        out.append(
            f"Model fitness: {len(failed)} of {len(fit)} tool, format and task gates fail"
            f"{both}; at this size the model is not fit for these tasks, so their failures say "
            "nothing about the change, and the speed figures stand on their own."
        )
    quality = record_of(records, "quality", QualityRecord)
    if quality is not None and quality.budget_scale != 1:  # the budgets sent were scaled
        attempts = [a for r in quality.table for a in r.attempts]
        out.append(
            f"Quality budgets were scaled to {quality.budget_scale:g} of the declared ones (the "
            f"table shows both); {attempts.count('cut')} of {len(attempts)} attempts were cut by "
            "the budget sent."
        )
    out += _comparability(gates)
    ab = record_of(records, "ab", AbRecord)  # the A/B's decode comparison rests on how many
    p = ab_section.paired_of(ab).get("decode_tok_s") if ab is not None else None
    if ab is None or p is None or not p.model_fields_set:
        return out
    m = ab.row("decode_tok_s")
    runs = given(m.runs, ("candidate",))["candidate"] if m is not None else None
    drafts = ab.acceptance.drafts if ab.acceptance is not None else None
    more = f", {drafts:,} drafts" if drafts is not None else ""
    pairs, prompts = given(p, ("pairs", "prompts")).values()  # None: not written
    out.append(
        f"Sample size: the A/B compares {pairs} request pairs over {prompts} prompts and "
        f"{runs} runs per lane{more}; an interval from so few is wide, and one marked too few "
        "samples is no result."
    )
    return out


def _comparability(gates: list[GateOutcome]) -> list[str]:
    """What the control cannot speak to: the candidate's preflight and quality gates at
    reasoning levels the control did not run (their causes read "not compared with the
    control")."""
    cand, ctrl = preflight_levels(gates)
    alone = [lv for lv in cand if lv not in ctrl]
    if not alone:
        return []
    probes = ("preflight", "quality")
    n = sum(
        1
        for g in gates
        if g.stage in probes and g.level in alone and not g.gate.startswith("control-")
    )
    theirs = (
        f"the control ran preflight at {', '.join(ctrl)}, the candidate also at "
        if ctrl
        else "the control ran no preflight, the candidate ran it at "
    )
    return [
        f"Comparability: {theirs}{', '.join(alone)}: its {n} preflight and quality gates there "
        "are not compared with the control, so they cannot say whether the change or the base "
        "fails them."
    ]
