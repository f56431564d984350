"""What blocks the decision, for its first screen: each blocking gate, missing stage and
integrity problem with the evidence file that shows it, the causes they come down to, what must
change for the answer to change, and the failed attempts grouped by cause."""

from __future__ import annotations

from qualify.decision import causes
from qualify.evidence.store import RESULT, RunDir
from qualify.present.record import DecisionRecord, GateOutcome
from qualify.present.wording import ATTEMPT_PREFIX, Once, reason_parts, short
from qualify.records import Verdict

FIRST_SCREEN_CAUSES = 8
"""Causes listed on the first screen; more are counted there and listed below it."""


def evidence_file(run: RunDir, g: GateOutcome) -> str:
    """The run-relative path of the file that shows a gate's verdict (always an existing one:
    the failing exchange when the gate names one, else its stage attempt's result.json)."""
    base = f"{g.stage}/attempt-{g.authoritative.attempt:03d}"
    for t in g.tries:
        if t.verdict is Verdict.PASS:
            continue
        ranked = sorted(t.files, key=lambda f: (not f.endswith(".outcome.json"), f))
        for f in ranked:
            if (run.path / base / f).is_file():
                return f"{base}/{f}"
            if (run.path / f).is_file():
                return f
    return f"{base}/{RESULT}" if (run.path / base / RESULT).is_file() else "run.json"


def cause_rows(
    run: RunDir, record: DecisionRecord, groups: list[causes.Cause], once: Once
) -> list[dict[str, object]]:
    """Each cause as the document shows it: tag, what it is, how many gates, one reason said
    once with its evidence link, the action, and every gate key with its own tag and link."""
    ev = record.evaluation
    tags = {  # each blocking gate and missing pattern: its tag and the file that shows it
        g.key: ("vetoes" if g.status == "vetoes" else g.verdict.value, evidence_file(run, g))
        for g in ev.gates
        if g.status in ("blocks", "vetoes")
    } | dict.fromkeys(ev.missing, ("missing", "run.json"))
    other = ("blocks", "run.json")  # an integrity problem's
    out = []
    for c in groups:
        first, keys = (c.gates[0] if c.gates else None), c.keys
        why, link = c.title, "run.json"
        if first is not None:
            count, text = reason_parts(first)
            why, link = count + once.say(text, first.key), tags[first.key][1]
        elif keys[0] in ev.missing:
            said = next((r for r in ev.reasons if r.startswith(keys[0])), keys[0])
            why = short(said.removeprefix(f"{keys[0]}: "))
        shown = ", ".join(f"`{k}`" for k in keys[:3]) + (
            f" and {len(keys) - 3} more" if len(keys) > 3 else ""
        )
        out.append(
            {
                "tag": c.label,
                "title": c.title,
                "n": len(keys),
                "shown": shown,
                "why": why,
                "link": link,
                "action": c.action,
                "all": [
                    {"key": k, "verdict": tags.get(k, other)[0], "link": tags.get(k, other)[1]}
                    for k in keys
                ],
            }
        )
    return out


def exit_text(record: DecisionRecord, groups: list[causes.Cause]) -> str:
    """What must change, before which run, for the answer to change: the actions of the
    causes, not a count of gates."""
    ev = record.evaluation
    sha = record.policy_sha256[:16]
    if not record.promote:
        acts = list(dict.fromkeys(c.action for c in groups)) or ["every required gate passes"]
        listed = "; ".join(f"({i}) {a}" for i, a in enumerate(acts, 1))
        return (
            f"a fresh run of {record.candidate} (a new run, not a resume of {record.run_id}) "
            f"under policy {sha} after: {listed}. Or the house policy is reviewed and changed "
            "before that run, never after seeing this result."
        )
    if ev.waived:
        ends = sorted(str(w.expires) for w in record.waivers if w.accepted and w.expires)
        until = f" on {ends[0]}" if ends else ""
        return (
            f"The answer lapses when a waiver expires{until}; before then a fresh run must "
            f"pass {', '.join(ev.waived)} under policy {sha}."
        )
    return (
        f"The answer holds for the recipe as pinned under policy {sha}; a change of any pin, "
        "the engine build, the hardware or the policy needs a new run."
    )


def failed_attempts(record: DecisionRecord, once: Once) -> list[dict[str, str]]:
    """Superseded attempts and retried gates, grouped by cause; a cause is written once."""
    groups: dict[str, list[str]] = {}
    keys: dict[str, str] = {}
    for s in record.evaluation.stages:
        for a in s.superseded:
            said = "; ".join(a.reasons) or f"{a.status}, no reason recorded"
            if "the run was aborted earlier (" in said:
                said = "not run: the run had stopped on the cause above"
            cause = short(said)
            label = f"{s.stage} attempt {a.attempt} ({a.status})"
            groups.setdefault(cause, []).append(label)
            keys.setdefault(cause, f"{s.stage} attempt {a.attempt}")
    retried = [
        g
        for g in record.evaluation.gates
        if len(g.tries) > 1 and any(t.verdict is not Verdict.PASS for t in g.tries)
    ]
    every = [
        g
        for g in retried
        if g.status in ("blocks", "vetoes") and all(t.verdict is not Verdict.PASS for t in g.tries)
    ]
    if len(every) > 3:
        counts = sorted({len(g.tries) for g in every})
        label = f"{len(every)} blocking gates ({'/'.join(map(str, counts))} tries each)"
        groups[label] = [label]
        keys[label] = label  # a count, written as it is
        retried = [g for g in retried if g not in every]
    for g in retried:
        bad = [t for t in g.tries if t.verdict is not Verdict.PASS]
        if bad:
            cause = short(ATTEMPT_PREFIX.sub("", "; ".join(bad[0].reasons)) or "no reason")
            if g.status in ("blocks", "vetoes"):
                cause = f"the reason of `{g.key}`, among the blocking causes"
            tries = ", ".join(f"{t.number} {t.verdict.value}" for t in g.tries)
            groups.setdefault(cause, []).append(f"{g.key} (tries {tries})")
            keys.setdefault(cause, g.key)
    out = []
    for cause, labels in groups.items():
        if labels == [cause]:
            out.append({"who": cause, "cause": "every try failed; the causes are above"})
        else:
            out.append({"who": "; ".join(labels), "cause": once.say(cause, keys[cause])})
    return out
