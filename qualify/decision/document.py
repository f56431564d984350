"""The decision document: `templates/decision.md.j2` rendered from evidence alone.

The first screen answers the reviewer: the verdict, the alias it gates, the hardware, the
headline figures, every blocking reason in one line with a link to the evidence file that shows
it, and what must change for the answer to change. The detail follows in seed 002's order.
Each failure is written once (`Once`) and referenced by its gate key after that; a table cell
never holds more than `CELL_MAX` characters. Links are relative to `decision/attempt-NNN/`,
where `decision.md` and its plots are written.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import jinja2

from qualify.decision import plots, sections
from qualify.decision.house import PolicyRules
from qualify.decision.reading import candidate_in_run
from qualify.decision.record import DecisionRecord, GateOutcome, StageOutcome
from qualify.errors import BadInput
from qualify.evidence.store import RESULT, RunDir
from qualify.records import StageResult, Verdict

TEMPLATE = "decision.md.j2"
CELL_MAX = 120
LINE_MAX = 160
UP = "../../"  # from decision/attempt-NNN/ to the run directory


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


def short(value: Any, limit: int = LINE_MAX) -> str:
    """One line of at most `limit` characters; the rest lives in the evidence. A `<` is written
    `&lt;`, so that quoted markup (`<tool_response>`) shows instead of vanishing as an HTML tag
    when the document is rendered."""
    text = " ".join(str(value).split())
    text = text if len(text) <= limit else text[: limit - 1].rstrip() + "…"
    return text.replace("<", "&lt;")


def _cell(value: Any) -> str:
    """Text safe inside a markdown table cell, at most CELL_MAX characters."""
    return short(value, CELL_MAX).replace("|", "\\|")


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


def _d(x: Any) -> dict[str, Any]:
    return x if isinstance(x, dict) else {}


def _l(x: Any) -> list[Any]:
    return x if isinstance(x, list) else []


class Once:
    """Each failure text is written once; later mentions name the gate key that holds it."""

    def __init__(self) -> None:
        self.seen: dict[str, str] = {}

    def say(self, text: str, key: str) -> str:
        if text in self.seen:
            return f"as {self.seen[text]}"
        self.seen[text] = key
        return text


_ATTEMPT_PREFIX = re.compile(r"^attempt \d+/\d+: ")


def reason_parts(g: GateOutcome) -> tuple[str, str]:
    """A gate's reasons as (how many attempts said it, what was said once, one line)."""
    texts = [_ATTEMPT_PREFIX.sub("", r) for r in g.reasons]
    unique = list(dict.fromkeys(texts))
    count = f"{len(texts)} of {len(texts)} attempts: " if len(texts) > 1 == len(unique) else ""
    return count, short("; ".join(unique) or "no reason recorded")


def reason_of(g: GateOutcome) -> str:
    """A gate's reasons in one line: repeated attempts said once, with their count."""
    count, text = reason_parts(g)
    return count + text


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


def _blocking(run: RunDir, record: DecisionRecord, once: Once) -> list[dict[str, str]]:
    ev = record.evaluation
    out = []
    for g in ev.gates:
        if g.status in ("blocks", "vetoes"):
            count, text = reason_parts(g)
            why = count + once.say(text, g.key)
            tag = "vetoes" if g.status == "vetoes" else g.verdict.value
            out.append({"key": g.key, "tag": tag, "why": why, "link": evidence_file(run, g)})
    for pattern in ev.missing:
        why = next((r for r in ev.reasons if r.startswith(pattern)), pattern)
        text = short(why.removeprefix(f"{pattern}: "))
        out.append({"key": pattern, "tag": "missing", "why": text, "link": "run.json"})
    for problem in record.integrity:
        path = problem.split(":", 1)[0]
        link = path if (run.path / path).is_file() else "run.json"
        out.append({"key": "evidence", "tag": "integrity", "why": short(problem), "link": link})
    first = ("integrity", "vetoes", "missing")
    return sorted(out, key=lambda b: first.index(b["tag"]) if b["tag"] in first else len(first))


FIRST_SCREEN_REASONS = 12
"""Blocking reasons shown on the first screen; the rest follow it, each still written once."""


def _counts_by_stage(keys: list[str]) -> str:
    counts: dict[str, int] = {}
    for k in keys:
        stage = k.partition("/")[0]
        counts[stage] = counts.get(stage, 0) + 1
    return ", ".join(f"{s} {n}" for s, n in counts.items())


def _by_stage(keys: list[str]) -> str:
    groups: dict[str, list[str]] = {}
    for k in keys:
        stage, _, rest = k.partition("/")
        groups.setdefault(stage, []).append(rest or k)
    return "; ".join(f"{s}: {', '.join(v)}" for s, v in groups.items())


def _exit(record: DecisionRecord) -> str:
    """What must change, before which run, for the answer to change."""
    ev = record.evaluation
    sha = record.policy_sha256[:16]
    blocking = [g.key for g in ev.gates if g.status in ("blocks", "vetoes")] + ev.missing
    listed = (
        _by_stage(blocking)
        if len(blocking) <= FIRST_SCREEN_REASONS
        else f"{_counts_by_stage(blocking)}; each listed above"
    )
    if not record.promote:
        text = (
            f"A fresh run of {record.candidate} (a new run, not a resume of {record.run_id}) "
            f"passes {len(blocking)} gate(s) now blocking ({listed}) under policy "
            f"{sha}, or the house policy is reviewed and changed before that run, never after "
            "seeing this result."
        )
        if record.integrity:
            text = "The evidence is restored to what its manifests seal, and " + text[0].lower()
            text += text[1:]
        return text
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


def _lane_name(ab: dict[str, Any], lane: str) -> str:
    return str(_d(_d(ab.get("lanes")).get(lane)).get("name") or lane)


def _metric(ab: dict[str, Any], name: str) -> dict[str, Any]:
    return next((_d(m) for m in _l(ab.get("metrics")) if _d(m).get("metric") == name), {})


def _figures(data: dict[str, dict[str, Any]], gates: list[GateOutcome]) -> list[str]:
    """The headline figures, one short line each; 'no data' where a stage did not record one."""
    out = []
    ab = data.get("ab") or {}
    for name, label in (("decode_tok_s", "decode p50"), ("e2e_s", "E2E p50")):
        m = _metric(ab, name)
        if m:
            unit = str(m.get("unit") or "")
            out.append(
                f"A/B {label}: {_value(m.get('candidate'), unit)} vs "
                f"{_value(m.get('control'), unit)} ({_delta(sections_delta(m))}; 95% interval "
                f"{sections.interval(m)})"
            )
    if not ab:
        out.append("A/B: not run")
    acc = _d(ab.get("acceptance"))
    if acc:
        out.append("acceptance: " + _acceptance_short(acc, ab))
    q = _d(data.get("quality"))
    out += [str(x) for x in _l(q.get("lines"))] or ["quality: not run"]
    out.append("context reached: " + _context_reached(data.get("context") or {}))
    cap = sections.capacity(data.get("capacity") or {})
    best = cap["best"]
    if best:
        out.append(
            f"capacity: {_num(best.get('aggregate_output_tok_s'))} tok/s aggregate at "
            f"c={best.get('concurrency')}, {_num(best.get('length'), 0)}-token prompts"
        )
    vram = data.get("vram") or {}
    cards = sections.card_minimums(vram)
    if cards:
        reserve = _num((vram.get("reserve_gib") or 0) * 1024, 0)
        out.append(
            "minimum free VRAM: "
            + "; ".join(
                f"GPU {c['gpu']} {_value(c['min_free_mib'], 'MiB', 0)} ({c['verdict']})"
                for c in cards
            )
            + f" against a {reserve} MiB reserve"
        )
    else:
        out.append("minimum free VRAM: no GPU telemetry")
    fid = sections.fidelity(data)
    if fid:
        out.append(
            "fidelity (client/server decode, median): "
            + ", ".join(f"{f['stage']} {_num(f['decode_ratio'], 3)}" for f in fid)
        )
    return out


def sections_delta(m: dict[str, Any]) -> dict[str, Any]:
    return {
        "delta_pct": m.get("delta_pct"),
        "within_noise": bool(m.get("within_noise")),
        "better": m.get("better"),
    }


def _acceptance_short(acc: dict[str, Any], ab: dict[str, Any]) -> str:
    rate, mean = acc.get("rate"), acc.get("mean_length")
    text = f"{100 * rate:.1f}%" if isinstance(rate, int | float) else "no rate"
    if isinstance(mean, int | float):
        text += f", {mean:.2f} tokens per draft"
        if _draft_overrun(acc, ab):
            text += " (implausible, see caveats)"
    return text + f" ({_num(acc.get('accepted'), 0)} of {_num(acc.get('draft_tokens'), 0)})"


def _draft_overrun(acc: dict[str, Any], ab: dict[str, Any]) -> int | None:
    """The pinned draft length when the counters' tokens per draft exceed it (+1 bonus)."""
    spec = _d(_d(_d(ab.get("lanes")).get("candidate")).get("speculation"))
    n, mean = spec.get("draft_tokens"), acc.get("mean_length")
    if isinstance(n, int) and n > 0 and isinstance(mean, int | float) and mean > n + 1:
        return n
    return None


def _context_reached(ctx: dict[str, Any]) -> str:
    rows = [_d(r) for r in _l(ctx.get("rows"))]
    if not rows:
        return "not run"
    parts = []
    for p in ("cold", "warm"):
        mine = [r for r in rows if r.get("pass") == p]
        ok = [r for r in mine if r.get("verdict") == "pass"]
        top = max((r.get("actual_prompt_tokens") or 0 for r in ok), default=None)
        most = max((r.get("actual_prompt_tokens") or 0 for r in mine), default=None)
        if mine:
            parts.append(f"{p} {_num(top, 0) if top else 'none'} passed of {_num(most, 0)} sent")
    return "; ".join(parts) + " prompt tokens"


def _hardware(data: dict[str, dict[str, Any]], info: dict[str, Any], run: RunDir) -> list[str]:
    vram = data.get("vram") or {}
    cards = [_d(c) for c in _l(vram.get("cards"))]
    names = list(dict.fromkeys(str(c.get("name") or "unnamed") for c in cards))
    host = _d(vram.get("host")) | {
        k: vram[k] for k in ("driver", "cuda", "interconnect") if k in vram
    }
    if cards:
        totals = {c.get("total_mib") for c in cards}
        total = next(iter(totals)) if len(totals) == 1 else None
        gpu = f"{len(cards)} x {', '.join(names)}" + (
            f" ({_num(total, 0)} MiB each)" if isinstance(total, int | float) else ""
        )
        extra = ", ".join(
            f"{k} {host[k] if host.get(k) else 'not recorded'}"
            for k in ("driver", "cuda", "interconnect")
        )
        gpu += f"; {extra} (telemetry: {vram.get('source') or 'unknown'})"
    else:
        gpu = "no GPU telemetry"
    ident = data.get("identity") or {}
    pins, rep = _d(ident.get("pins")), _d(ident.get("reported"))
    build = rep.get("engine_build") or (
        f"{pins['engine_build']} (pinned, not reported)" if pins.get("engine_build") else None
    )
    engine = f"{pins.get('engine') or 'engine not recorded'} build {build or 'not recorded'}"
    cpu = host.get("cpu") or info.get("cpu")
    plat = info.get("platform")
    return [
        f"GPU: {gpu}",
        f"CPU: {cpu or 'not recorded'}" + (f"; platform {plat}" if plat else ""),
        f"Engine: {engine}",
    ]


def _alias(run: RunDir, record: DecisionRecord, data: dict[str, dict[str, Any]]) -> str:
    """The alias this decision gates and what it points at now (the house table, read only)."""
    cand = candidate_in_run(run, record.candidate_copy)
    if cand is None or cand.alias is None:
        return "gates no production alias: the candidate names none"
    name = cand.alias.name
    if record.house.root:
        from qualify.alias import TABLE, read_table

        try:
            target = read_table(Path(record.house.root) / TABLE).get(name)
        except BadInput as exc:
            why = short(exc.headline, 80)
            return f"gates `{name}`; the house alias table could not be read ({why})"
        if not target:
            return f"gates `{name}`, which points at nothing yet"
        return (
            f"gates `{name}`, which points at {target.get('candidate')} "
            f"(run {target.get('run_id') or 'unknown'}) now"
        )
    inc = _d(_d(data.get("capacity")).get("incumbent"))
    if inc.get("candidate"):
        return f"gates `{name}`, which pointed at {inc['candidate']} when capacity ran"
    return f"gates `{name}` (no house repository given, so its alias table was not read)"


def _launch(run: RunDir, data: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The candidate server's command as launched, and the file that records it."""
    launch = _d(_d(data.get("identity")).get("launch"))
    args = _l(launch.get("args"))
    if args:
        return {"command": " ".join(str(a) for a in args), "file": None}
    for d in reversed(run.attempt_dirs("server-candidate")):
        f = d / "launch.json"
        try:
            cmd = _l(_d(json.loads(f.read_text())).get("command"))
        except (OSError, ValueError):
            continue
        if cmd:
            return {"command": " ".join(str(a) for a in cmd), "file": _rel(run, f)}
    return {"command": None, "file": None}


def _rel(run: RunDir, path: Path) -> str:
    return path.relative_to(run.path).as_posix()


def _policy(record: DecisionRecord) -> dict[str, Any]:
    """The effective policy in a few lines, and where the house policy came from."""
    rules = PolicyRules.model_validate(record.policy)
    h = record.house
    where = f"`{h.root}` at commit {(h.commit or 'none')[:12]}" if h.root else "built-in defaults"
    return {
        "source": where,
        "house_sha256": h.policy_sha256,
        "tightened": h.policy_sha256 != record.policy_sha256,
        "lines": rules.lines(),
    }


def _failed_attempts(record: DecisionRecord, once: Once) -> list[dict[str, str]]:
    """Superseded attempts and retried gates, grouped by cause; a cause is written once."""
    groups: dict[str, list[str]] = {}
    keys: dict[str, str] = {}
    for s in record.evaluation.stages:
        for a in s.superseded:
            cause = short("; ".join(a.reasons) or f"{a.status}, no reason recorded")
            label = f"{s.stage} attempt {a.attempt} ({a.status})"
            groups.setdefault(cause, []).append(label)
            keys.setdefault(cause, f"{s.stage} attempt {a.attempt}")
    for g in record.evaluation.gates:
        bad = [t for t in g.tries if t.verdict is not Verdict.PASS]
        if bad and len(g.tries) > 1:
            cause = short(_ATTEMPT_PREFIX.sub("", "; ".join(bad[0].reasons)) or "no reason")
            if g.status in ("blocks", "vetoes"):
                cause = f"the reason of `{g.key}` under Blocking"
            tries = ", ".join(f"{t.number} {t.verdict.value}" for t in g.tries)
            groups.setdefault(cause, []).append(f"{g.key} (tries {tries})")
            keys.setdefault(cause, g.key)
    return [
        {"who": "; ".join(labels), "cause": once.say(cause, keys[cause])}
        for cause, labels in groups.items()
    ]


def _caveats(
    record: DecisionRecord, info: dict[str, Any], data: dict[str, dict[str, Any]], once: Once
) -> list[str]:
    out = []
    git = _d(info.get("git"))
    if git.get("dirty"):
        out.append("The repository holding the candidate had uncommitted changes at run time.")
    if git.get("file_dirty"):
        out.append("The candidate file itself differed from its committed version.")
    if git and git.get("commit") is None:
        out.append("The candidate was not in a git repository with a commit.")
    unreported = _l(_d(data.get("identity")).get("not_reported"))
    if unreported:
        out.append(
            "Declared, not verified (the server does not report them): "
            + ", ".join(str(u) for u in unreported)
            + "."
        )
    out += _sanity(data)
    if data.get("context"):
        out.append(
            "Effective prefill is prompt tokens divided by client-observed TTFO; it includes "
            "queueing and scheduling, not kernel prefill alone."
        )
    if record.unsealed:
        out.append("Attempts open at decision time are not covered: " + ", ".join(record.unsealed))
    for g in record.evaluation.gates:
        if g.status == "advisory" and g.verdict is not Verdict.PASS:
            count, text = reason_parts(g)
            out.append(f"Advisory `{g.key}` {g.verdict.value}: {count}{once.say(text, g.key)}")
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


def _sanity(data: dict[str, dict[str, Any]]) -> list[str]:
    """Figures the evidence itself contradicts, flagged where a reader would trust them."""
    out = []
    ab = data.get("ab") or {}
    acc = _d(ab.get("acceptance"))
    n = _draft_overrun(acc, ab)
    if n is not None:
        out.append(
            f"Implausible: the acceptance counters give {acc['mean_length']:.2f} tokens per "
            f"draft, more than the pinned draft length of {n} (+1 bonus token); the counters' "
            f"scope ({acc.get('source') or 'not recorded'}) is not one draft per request, so "
            "treat the acceptance figures as unverified."
        )
    for lane in ("candidate", "control"):
        info = _d(_d(ab.get("lanes")).get(lane))
        median = _d(info.get("figure")).get("decode_tok_s")
        if not isinstance(median, int | float) or median <= 0:
            continue
        fast = [
            float(q["decode_tok_s"])
            for r in _l(info.get("runs"))
            for q in (_d(x) for x in _l(_d(r).get("requests")))
            if isinstance(q.get("decode_tok_s"), int | float) and q["decode_tok_s"] > 2 * median
        ]
        if fast:
            out.append(
                f"Implausible: {len(fast)} {_lane_name(ab, lane)} request(s) decoded above twice "
                f"the lane's median of {median:,.1f} tok/s (up to {max(fast):,.1f}); they are "
                "in the medians and shown in the A/B plot."
            )
    excluded = _l(ab.get("excluded"))
    if excluded:
        out.append(
            f"{len(excluded)} A/B request(s) excluded from the figures (degenerate or "
            "reasoning-only answers), listed in the A/B section."
        )
    cap_deg = _l(_d(data.get("capacity")).get("degenerate"))
    if cap_deg:
        out.append(f"{len(cap_deg)} degenerate capacity answer(s) left out of every speed figure.")
    for t in (_d(x) for x in _l(_d(data.get("context")).get("targets"))):
        if t.get("clamped") is True:
            out.append(
                f"The context rung named {_num(t.get('target'), 0)} (its gate keys too) measured "
                f"{_num(t.get('planned_tokens'), 0)} planned tokens: clamped to leave the "
                f"completion margin inside the {_num(t.get('window'), 0)}-token window."
            )
    return out


STANDARD_STAGES = ("identity", "preflight", "quality", "context", "capacity", "ab", "vram")


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
    git = _d(info.get("git"))
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


def _passed(g: GateOutcome) -> bool:
    return g.status == "pass" or (g.status == "advisory" and g.verdict is Verdict.PASS)


def _gate_summary(record: DecisionRecord) -> list[dict[str, str]]:
    """Per stage: how many gates passed, and the keys of the others with their status."""
    out = []
    for stage in dict.fromkeys(g.stage for g in record.evaluation.gates):
        mine = [g for g in record.evaluation.gates if g.stage == stage]
        other = [
            f"{g.key.partition('/')[2]} ({g.status}"
            + (f" {g.verdict.value})" if g.status == "advisory" else ")")
            for g in mine
            if not _passed(g)
        ]
        ok = sum(_passed(g) for g in mine)
        out.append({"stage": stage, "passed": f"{ok}/{len(mine)}", "other": ", ".join(other)})
    return out


def plot_plan(run: RunDir, record: DecisionRecord) -> list[plots.Plot]:
    """The plots of this decision, with their points (nothing drawn)."""
    data, dirs = _data(run, record)
    return plots.plan(run, data, dirs.get("vram"))


def _data(run: RunDir, record: DecisionRecord) -> tuple[dict[str, dict[str, Any]], dict[str, Path]]:
    results = {s.stage: _result(run, s) for s in record.evaluation.stages}
    data = {k: (r.data if r else {}) for k, r in results.items()}
    dirs = {
        s.stage: run.path / s.stage / f"attempt-{s.authoritative.attempt:03d}"
        for s in record.evaluation.stages
        if s.authoritative is not None
    }
    return data, dirs


def attempt_dir(run: RunDir, record: DecisionRecord) -> Path:
    return run.path / "decision" / f"attempt-{record.attempt:03d}"


def context(run: RunDir, record: DecisionRecord, info: dict[str, Any]) -> dict[str, Any]:
    """Everything the template shows, computed from the run and its decision record."""
    results = {s.stage: _result(run, s) for s in record.evaluation.stages}
    data, dirs = _data(run, record)
    gates = record.evaluation.gates
    stages = _stages(record)
    times = [t for r in results.values() if r for t in (r.started_at, r.ended_at)]
    once = Once()
    blocking = _blocking(run, record, once)
    here = attempt_dir(run, record)
    plan = plots.plan(run, data, dirs.get("vram"))
    figures = {
        p.name.removesuffix(".png").replace("-", "_"): {
            "name": p.name,
            "title": p.title,
            "drawn": (here / p.name).is_file(),
            "missing": p.missing if p.empty else "not drawn: a preview draws no plots",
        }
        for p in plan
    }
    return {
        "r": record,
        "up": UP,
        "prov": _provenance(record, info),
        "stage": stages,
        "window": (min(times), max(times)) if times else None,
        "alias": _alias(run, record, data),
        "hardware": _hardware(data, info, run),
        "figures": _figures(data, gates),
        "blocking": blocking,
        "first_screen_reasons": FIRST_SCREEN_REASONS,
        "more_by_stage": _counts_by_stage([b["key"] for b in blocking[FIRST_SCREEN_REASONS:]]),
        "exit": _exit(record),
        "policy": _policy(record),
        "launch": _launch(run, data),
        "identity": sections.identity_rows(data.get("identity") or {}, gates),
        "functional": sections.functional(gates),
        "quality": sections.quality(data.get("quality") or {}),
        "context": sections.context_rows(data.get("context") or {}),
        "capacity": sections.capacity(data.get("capacity") or {}),
        "ab": sections.ab_rows(data.get("ab") or {}),
        "ab_lanes": sections.ab_lanes(data.get("ab") or {}),
        "ab_gates": [g for g in gates if g.stage == "ab"],
        "vram": sections.vram_rows(data.get("vram") or {}),
        "fidelity": sections.fidelity(data),
        "plot": figures,
        "failed": _failed_attempts(record, once),
        "caveats": _caveats(record, info, data, once),
        "gate_summary": _gate_summary(record),
        "record_written": (here / "decision.json").is_file(),
    }


def render(run: RunDir, record: DecisionRecord, info: dict[str, Any]) -> str:
    return environment().get_template(TEMPLATE).render(**context(run, record, info))


def write_plots(run: RunDir, record: DecisionRecord) -> list[tuple[str, bytes]]:
    """The PNGs of this decision, to be written beside decision.md before it is rendered."""
    return plots.drawn(plot_plan(run, record))
