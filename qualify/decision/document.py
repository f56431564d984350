"""The decision document: `templates/decision.md.j2` rendered from evidence alone."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import jinja2

from qualify.decision import sections
from qualify.decision.house import PolicyRules
from qualify.decision.record import DecisionRecord, GateOutcome, StageOutcome
from qualify.evidence.store import RESULT, RunDir
from qualify.records import StageResult

TEMPLATE = "decision.md.j2"


def templates_dir() -> Path:
    env = os.environ.get("QUALIFY_TEMPLATES")
    return Path(env) if env else Path(__file__).resolve().parents[2] / "templates"


def _num(value: Any, digits: int = 1) -> str:
    if value is None:
        return "no data"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    return f"{value:,.0f}" if isinstance(value, int) or digits == 0 else f"{value:,.{digits}f}"


def _dur(value: Any) -> str:
    """Seconds, shown in ms below one second (as operators read them)."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return "no data"
    return f"{value * 1000:,.0f} ms" if value < 1 else f"{value:,.2f} s"


def _value(value: Any, unit: str, digits: int = 1) -> str:
    if unit == "s":
        return _dur(value)
    return _num(value, digits) + (f" {unit}" if unit and value is not None else "")


def _delta(m: dict[str, Any]) -> str:
    pct = m["delta_pct"]
    if not isinstance(pct, int | float):
        return "no data"
    noise = " (within noise)" if m["within_noise"] else ""
    if m["better"] == "lower":
        word = "lower" if pct < 0 else "higher"
        return f"{abs(pct):.1f}% {word}{noise}"
    return f"{pct:+.1f}%{noise}"


def _cell(value: Any) -> str:
    """Text safe inside a markdown table cell."""
    return str(value).replace("|", "\\|").replace("\n", " ")


def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(templates_dir()),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,  # markdown, not HTML
    )
    env.filters.update(num=_num, dur=_dur, value=_value, delta=_delta, cell=_cell)
    return env


def _result(run: RunDir, s: StageOutcome) -> StageResult | None:
    if s.authoritative is None:
        return None
    f = run.path / s.stage / f"attempt-{s.authoritative.attempt:03d}" / RESULT
    try:
        return StageResult.model_validate_json(f.read_text())
    except (OSError, ValueError):
        return None


def _outcome(record: DecisionRecord) -> str:
    ev = record.evaluation
    req = [g for g in ev.gates if g.required]
    ok = [g for g in req if g.status == "pass"]
    ran = [s.stage for s in ev.stages if s.ran]
    text = f"{len(ok)} of {len(req)} required gates passed"
    text += f" across {', '.join(ran)}." if ran else "; no stage ran."
    vetoes = [g.key for g in ev.gates if g.status == "vetoes"]
    blocks = [f"{g.key} ({g.verdict.value})" for g in ev.gates if g.status == "blocks"]
    idle = [f"{s.stage} ({s.why_not})" for s in ev.stages if not s.ran and s.planned]
    if ev.waived:
        text += f" Waived, not passed: {', '.join(f'{k} (inconclusive)' for k in ev.waived)}."
    if vetoes:
        text += f" A critical gate vetoes the promotion: {', '.join(vetoes)}."
    if blocks:
        text += f" Required gates that did not pass: {', '.join(blocks)}."
    if idle:
        text += f" Not run: {', '.join(idle)}."
    if ev.missing:
        text += f" Required but absent: {', '.join(ev.missing)}."
    if record.integrity:
        text += f" {len(record.integrity)} evidence file(s) no longer match their manifest."
    if record.promote and ev.waived:
        text += (
            " Every other required gate passed, so the candidate may back a production alias "
            "only with the waivers named here, until they expire."
        )
    elif record.promote:
        text += " Every required gate passed, so the candidate may back a production alias."
    else:
        text += " No production alias may change on the strength of this run."
    return text


def _policy(record: DecisionRecord) -> dict[str, Any]:
    """The effective policy in a few lines, and where the house policy came from."""
    rules = PolicyRules.model_validate(record.policy)
    h = record.house
    where = f"`{h.root}` at commit {(h.commit or 'none')[:12]}" if h.root else "built-in defaults"
    tightened = h.policy_sha256 != record.policy_sha256
    return {
        "source": where,
        "house_sha256": h.policy_sha256,
        "tightened": tightened,
        "lines": rules.lines(),
    }


def _failed_attempts(ev_stages: list[StageOutcome], gates: list[GateOutcome]) -> list[str]:
    out = []
    for s in ev_stages:
        for a in s.superseded:
            why = "; ".join(a.reasons) or "no reason recorded"
            tail = f"superseded by attempt {s.authoritative.attempt}" if s.authoritative else ""
            verdict = a.verdict.value if a.verdict else "no verdict"
            out.append(f"{s.stage} attempt {a.attempt}: {a.status}, {verdict}: {why}; {tail}")
    for g in gates:
        bad = [t for t in g.tries if t.verdict.value != "pass"]
        if bad and len(g.tries) > 1:
            tries = ", ".join(f"try {t.number} {t.verdict.value}" for t in g.tries)
            out.append(f"{g.key}: {tries} (final verdict {g.verdict.value})")
    return [o.rstrip("; ") for o in out]


def _caveats(record: DecisionRecord, info: dict[str, Any], data: dict[str, Any]) -> list[str]:
    out = []
    git = info.get("git") or {}
    if git.get("dirty"):
        out.append("The repository holding the candidate had uncommitted changes at run time.")
    if git.get("file_dirty"):
        out.append("The candidate file itself differed from its committed version.")
    if git and git.get("commit") is None:
        out.append("The candidate was not in a git repository with a commit.")
    unreported = (data.get("identity") or {}).get("not_reported") or []
    if unreported:
        out.append(
            "The server does not report these pins, so they are declared, not verified: "
            + ", ".join(str(u) for u in unreported)
            + "."
        )
    if data.get("context"):
        out.append(
            "Effective prefill is prompt tokens divided by client-observed TTFO; it includes "
            "queueing and scheduling, not kernel prefill alone."
        )
    if record.unsealed:
        out.append(
            "Attempts still open when the decision was made are not covered by it: "
            + ", ".join(record.unsealed)
            + "."
        )
    out += [f"Evidence integrity: {p}." for p in record.integrity]
    out += [f"Advisory: {n}." for n in record.evaluation.notes]
    out += [
        f"Waived, not passed: {w.gate} by {w.signer} (key {str(w.signer_keyid)[:16]}), "
        f"ticket {w.ticket}, until {w.expires}."
        for w in record.waivers
        if w.accepted and w.gate in record.evaluation.waived
    ]
    out += [f"Waiver {w.path} not accepted: {w.why}." for w in record.waivers if not w.accepted]
    return out


STANDARD_STAGES = ("identity", "preflight", "context", "ab", "vram")


def _stages(record: DecisionRecord) -> dict[str, StageOutcome]:
    """Every standard stage, so a stage that was never planned still says why it is absent."""
    found = {s.stage: s for s in record.evaluation.stages}
    for name in STANDARD_STAGES:
        found.setdefault(
            name,
            StageOutcome(stage=name, planned=False, ran=False, why_not="not listed in stages.run"),
        )
    return found


def _provenance(record: DecisionRecord, info: dict[str, Any]) -> dict[str, Any]:
    raw = info.get("git")
    git: dict[str, Any] = raw if isinstance(raw, dict) else {}
    return {
        "candidate_path": info.get("candidate_path") or record.candidate_path or "not recorded",
        "candidate_sha256": info.get("candidate_sha256") or record.candidate_sha256 or "unknown",
        "control_path": info.get("control_path"),
        "control_sha256": info.get("control_sha256"),
        "tool_version": info.get("tool_version") or "unknown",
        "git_commit": git.get("commit") or "none recorded",
        "git_dirty": git.get("dirty"),
        "repository": git.get("repository") or "not in a git repository",
    }


def _evidence_line(stages: dict[str, StageOutcome]) -> str:
    ran = [s.stage for s in stages.values() if s.ran]
    idle = [s.stage for s in stages.values() if not s.ran]
    return (", ".join(ran) or "no stage") + (f"; not run: {', '.join(idle)}" if idle else "")


def context(run: RunDir, record: DecisionRecord, info: dict[str, Any]) -> dict[str, Any]:
    """Everything the template shows, computed from the run and its decision record."""
    results = {s.stage: _result(run, s) for s in record.evaluation.stages}
    data = {k: (r.data if r else None) for k, r in results.items()}
    gates = record.evaluation.gates
    stages = _stages(record)
    times = [t for r in results.values() if r for t in (r.started_at, r.ended_at)]
    return {
        "r": record,
        "prov": _provenance(record, info),
        "stage": stages,
        "evidence_line": _evidence_line(stages),
        "window": (min(times), max(times)) if times else None,
        "outcome": _outcome(record),
        "policy": _policy(record),
        "identity": sections.identity_rows(data.get("identity") or {}, gates),
        "functional": sections.functional(gates),
        "context": sections.context_rows(data.get("context") or {}),
        "ab": sections.ab_rows(data.get("ab") or {}),
        "vram": sections.vram_rows(data.get("vram") or {}),
        "failed": _failed_attempts(record.evaluation.stages, gates),
        "caveats": _caveats(record, info, data),
    }


def render(run: RunDir, record: DecisionRecord, info: dict[str, Any]) -> str:
    return environment().get_template(TEMPLATE).render(**context(run, record, info))
