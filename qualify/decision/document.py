"""The decision document: `qualify/decision/templates/decision.md.j2` rendered from evidence alone.

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

from qualify.ab import section as ab_section
from qualify.capacity import section as capacity_section
from qualify.decision import causes, plots, sections
from qualify.decision.derive import NOT_QUALIFIED, cause_of, stop_reason
from qualify.decision.house import PolicyRules
from qualify.decision.reading import RunView, run_view
from qualify.decision.record import DecisionRecord, GateOutcome, StageOutcome
from qualify.diff.compare import AliasView, alias_view
from qualify.evidence.store import RESULT, RunDir
from qualify.records import Verdict
from qualify.registry import probe_stages, section_module, stage_names
from qualify.vram import section as vram_section

TEMPLATE = "decision.md.j2"
CELL_MAX = 120
LINE_MAX = 160
UP = "../../"  # from decision/attempt-NNN/ to the run directory


def templates_dir() -> Path:
    env = os.environ.get("QUALIFY_TEMPLATES")
    return Path(env) if env else Path(__file__).resolve().parent / "templates"


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


FIRST_SCREEN_CAUSES = 8
"""Causes listed on the first screen; more are counted there and listed below it."""


def _cause_rows(
    run: RunDir, record: DecisionRecord, groups: list[causes.Cause], once: Once
) -> list[dict[str, Any]]:
    """Each cause as the document shows it: tag, what it is, how many gates, one reason said
    once with its evidence link, the action, and every gate key with its own link."""
    links = {b["key"]: b for b in _blocking(run, record, Once())}
    out = []
    for c in groups:
        first = c.gates[0] if c.gates else None
        if first is not None:
            count, text = reason_parts(first)
            why = count + once.say(text, first.key)
            link = evidence_file(run, first)
        else:
            b = links.get(c.keys[0], {})
            why, link = b.get("why", c.title), b.get("link", "run.json")
        keys = c.keys
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
                    {
                        "key": k,
                        "verdict": links.get(k, {}).get("tag", "blocks"),
                        "link": links.get(k, {}).get("link", "run.json"),
                    }
                    for k in keys
                ],
            }
        )
    return out


def _tag_counts(groups: list[causes.Cause]) -> str:
    counts: dict[str, int] = {}
    for c in groups:
        counts[c.label] = counts.get(c.label, 0) + 1
    return ", ".join(f"{n} {label}" for label, n in counts.items())


def _exit(record: DecisionRecord, groups: list[causes.Cause]) -> str:
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


def _lane_name(ab: dict[str, Any], lane: str) -> str:
    return str(_d(_d(ab.get("lanes")).get(lane)).get("name") or lane)


def _metric(ab: dict[str, Any], name: str) -> dict[str, Any]:
    return next((_d(m) for m in _l(ab.get("metrics")) if _d(m).get("metric") == name), {})


_QUALITY = re.compile(r"^quality(?: \((\w+)\))?: ")


def _figures(data: dict[str, dict[str, Any]], gates: list[GateOutcome]) -> list[str]:
    """The headline figures, one short line each; 'no data' where a stage did not record one."""
    out = []
    ab = data.get("ab") or {}
    paired = ab_section.paired(ab)
    for name, label in (("e2e_s", "E2E p50"),):  # decode is in the outcome
        m = _metric(ab, name)
        if m:
            unit = str(m.get("unit") or "")
            out.append(
                f"A/B {label}: {_value(m.get('candidate'), unit)} vs "
                f"{_value(m.get('control'), unit)} (median of {ab_section.runs_of(m)}); paired: "
                f"{ab_section.paired_text(paired.get(name))}"
            )
    if not ab:
        out.append("A/B: not run")
    acc = _d(ab.get("acceptance"))
    if acc:
        out.append("acceptance: " + _acceptance_short(acc, ab))
    q = _d(data.get("quality"))
    lines = [str(x) for x in _l(q.get("lines"))]
    parts = [_QUALITY.sub(lambda m: f"{m.group(1)} " if m.group(1) else "", x) for x in lines]
    out.append("quality: " + "; ".join(parts) if parts else "quality: not run")
    out.append("context reached: " + _context_reached(data.get("context") or {}))
    cap = capacity_section.capacity(data.get("capacity") or {})
    best = cap["best"]
    if best:
        out.append(
            f"capacity: {_num(best.get('aggregate_output_tok_s'))} tok/s aggregate at "
            f"c={best.get('concurrency')}, {_num(best.get('length'), 0)}-token prompts"
        )
    vram = data.get("vram") or {}
    cards = vram_section.card_minimums(vram)
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
    fid = sections.fidelity(data, gates)
    if fid:
        out.append(
            "fidelity (client against server, median): "
            + "; ".join(
                f"{f['stage']} decode ratio {_num(f['decode_ratio'], 3)}, TTFT gap "
                f"{_value(f['ttft_gap_ms'], 'ms')}"
                + (f" ({f['ttft_lane']})" if f.get("ttft_lane") else "")
                + f" ({f['verdict']})"
                for f in fid
            )
        )
    return out


def sections_delta(m: dict[str, Any]) -> dict[str, Any]:
    return {
        "delta_pct": m.get("delta_pct"),
        "within_noise": bool(m.get("within_noise")),
        "better": m.get("better"),
    }


def _acceptance_short(acc: dict[str, Any], ab: dict[str, Any]) -> str:
    rate, drafts = acc.get("rate"), acc.get("drafts")
    text = f"{100 * rate:.1f}%" if isinstance(rate, int | float) else "no rate"
    text += f" ({_num(acc.get('accepted'), 0)} of {_num(acc.get('draft_tokens'), 0)} drafted)"
    per = ab_section.accepted_per_draft(acc)
    if per is not None:
        text += f", {per:.1f} accepted tokens per draft over {_num(drafts, 0)} drafts"
    share = ab_section.draft_share(ab)
    if share:
        text += f"; {share}"
    return text


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


def _first(*values: Any) -> Any:
    return next((v for v in values if v not in (None, "", [], {})), None)


def _hardware(data: dict[str, dict[str, Any]], info: dict[str, Any], run: RunDir) -> list[str]:
    """GPU, driver, CUDA and interconnect as the telemetry recorded them; CPU from run.json."""
    vram = data.get("vram") or {}
    cards = [_d(c) for c in _l(vram.get("cards"))]
    names = list(dict.fromkeys(str(c.get("name") or "unnamed") for c in cards))
    host, hw = _d(vram.get("host")), _d(vram.get("hardware"))
    tel = _d(next(iter(_l(vram.get("telemetry"))), {}))
    found = {
        "driver": _first(hw.get("driver_version"), host.get("driver"), tel.get("driver")),
        "CUDA": _first(hw.get("cuda_driver_version"), host.get("cuda"), tel.get("cuda")),
        "interconnect": _first(
            host.get("interconnect"), vram.get("interconnect"), tel.get("interconnect")
        ),
    }
    if cards:
        totals = {c.get("total_mib") for c in cards}
        total = next(iter(totals)) if len(totals) == 1 else None
        gpu = f"{len(cards)} x {', '.join(names)}" + (
            f" ({_num(total, 0)} MiB each)" if isinstance(total, int | float) else ""
        )
        known = [f"{k} {sections.show(v)}" for k, v in found.items() if v is not None]
        unknown = [k for k, v in found.items() if v is None]
        if known:
            gpu += "; " + ", ".join(known)
        if unknown:
            gpu += f"; {', '.join(unknown)} not in this run's telemetry"
        gpu += f" (telemetry: {vram.get('source') or 'unknown'})"
    else:
        gpu = "no GPU telemetry"
    ident = data.get("identity") or {}
    pins, rep = _d(ident.get("pins")), _d(ident.get("reported"))
    build = rep.get("engine_build") or (
        f"{pins['engine_build']} (pinned, not reported)" if pins.get("engine_build") else None
    )
    engine = f"{pins.get('engine') or 'engine not recorded'} build {build or 'not recorded'}"
    cpu = _first(host.get("cpu"), info.get("cpu"), hw.get("cpu_model"))
    if isinstance(cpu, dict):
        cores = cpu.get("cores")
        cpu = str(cpu.get("model") or "model not recorded") + (f", {cores} cores" if cores else "")
    plat = info.get("platform")
    return [
        f"GPU: {gpu}",
        f"CPU: {cpu or 'not recorded in this run'}" + (f"; platform {plat}" if plat else ""),
        f"Engine: {engine}",
    ]


def _alias(view: AliasView, data: dict[str, dict[str, Any]]) -> str:
    """The alias this decision gates and what it points at now (the house table, read once by
    `qualify.diff.compare.alias_view` and handed in as a value)."""
    if view.name is None:
        return "gates no production alias: the candidate names none"
    name, target = view.name, view.target
    if view.error is not None:
        why = short(view.error, 80)
        return f"gates `{name}`; the house alias table could not be read ({why})"
    if view.house:
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


def _against(view: AliasView) -> dict[str, Any] | None:
    """The diff's summary against the alias's current recipe, when there is one to show."""
    s = view.summary
    if s.get("status") not in ("compared", "unusable"):
        return None
    return {"name": view.name, **s}


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
            cause = short(_ATTEMPT_PREFIX.sub("", "; ".join(bad[0].reasons)) or "no reason")
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


def _caveats(
    record: DecisionRecord,
    info: dict[str, Any],
    data: dict[str, dict[str, Any]],
    once: Once,
    run_path: Path | None = None,
) -> list[str]:
    out = []
    git = _d(info.get("git"))
    if git.get("dirty"):
        out.append(
            "The repository holding the candidate had uncommitted changes at run time"
            + (", the candidate file among them." if git.get("file_dirty") else ".")
        )
    elif git.get("file_dirty"):
        out.append("The candidate file itself differed from its committed version.")
    if git and git.get("commit") is None:
        out.append("The candidate was not in a git repository with a commit.")
    unreported = _l(_d(data.get("identity")).get("not_reported"))
    blocking = {g.key for g in record.evaluation.gates if g.status in ("blocks", "vetoes")}
    unreported = [u for u in unreported if f"identity/pin@{u}" not in blocking]
    if unreported:
        out.append(
            "Declared, not verified (the server does not report them): "
            + ", ".join(str(u) for u in unreported)
            + "."
        )
    out += _substance(run_path, record, data)
    if record.unsealed:
        out.append("Attempts open at decision time are not covered: " + ", ".join(record.unsealed))
    out += _advisory(record, once)
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


def _advisory(record: DecisionRecord, once: Once) -> list[str]:
    """Advisory gates that did not pass, as caveats: the parts of one gate that said the same
    thing (every cell's `capacity/energy` unmeasured for one reason) are one line."""
    said: dict[tuple[str, str, str], list[GateOutcome]] = {}
    for g in record.evaluation.gates:
        if g.status == "advisory" and g.verdict is not Verdict.PASS:
            base = f"{g.stage}/{g.gate.split('@', 1)[0]}"
            said.setdefault((base, g.verdict.value, "".join(reason_parts(g))), []).append(g)
    out = []
    for (base, verdict, _), gates in said.items():
        count, text = reason_parts(gates[0])
        if len(gates) == 1:
            out.append(
                f"Advisory `{gates[0].key}` {verdict}: {count}{once.say(text, gates[0].key)}"
            )
            continue
        parts = ", ".join(g.key.removeprefix(base).lstrip("@") for g in gates)
        key = f"{base}@*"
        out.append(
            f"Advisory `{key}` {verdict} at {len(gates)} parts ({parts}): "
            f"{count}{once.say(text, key)}"
        )
    return out


_PER_REQUEST = re.compile(r"\btask \d+|\bid +\d+ \|")
_WEIGHTY = re.compile(r"context|capp|exceed|overflow|memory|fall(?:s|ing)? ?back|offload", re.I)
_WARNING = re.compile(r"^\S+ W (.*)$|^(?:.*\b)?(WARNING|Warning)[: ](.*)$")


def server_warnings(run_path: Path) -> list[dict[str, Any]]:
    """Distinct warnings the servers wrote to their logs (llama.cpp's ` W ` lines, `WARNING`
    lines of other engines), each with the lane, how many starts said it and its first log."""
    found: dict[tuple[str, str], dict[str, Any]] = {}
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
                    item = found.setdefault(
                        (lane, re.sub(r"\d+(?:\.\d+)?", "N", text)),
                        {"lane": lane, "text": text, "starts": set(), "log": log},
                    )
                    item["starts"].add(d.name)
    out = []
    for item in found.values():
        starts = {d.name for d in run_path.glob(f"server-{item['lane']}/attempt-*")}
        item["of"] = len(starts)
        item["starts"] = len(item["starts"])
        item["log"] = item["log"].relative_to(run_path).as_posix()
        out.append(item)
    out = [w for w in out if _WEIGHTY.search(w["text"]) or w["starts"] == w["of"]]
    out.sort(key=lambda w: (not _WEIGHTY.search(w["text"]), w["lane"] != "candidate"))
    merged: dict[str, dict[str, Any]] = {}
    for w in out:  # the same warning from both lanes is one caveat
        key = re.sub(r"\d+(?:\.\d+)?", "N", w["text"])
        if key in merged:
            had = merged[key]
            had["lane"] = f"{had['lane']} and {w['lane']}"
            had["starts"] += w["starts"]
            had["of"] += w["of"]
        else:
            merged[key] = dict(w)
    return list(merged.values())[:2]


def _substance(
    run_path: Path | None, record: DecisionRecord, data: dict[str, dict[str, Any]]
) -> list[str]:
    """Caveats a reviewer needs to weigh the figures: what the servers warned about, whether
    the model is fit for the tasks at all, scaled budgets, and the sample sizes."""
    out = []
    if run_path is not None:
        for w in server_warnings(run_path):
            out.append(
                f"The {w['lane']} server{'s' if ' and ' in w['lane'] else ''} warned in "
                f"{w['starts']} of {w['of']} starts: "
                f"«{short(w['text'], 140)}» ([log]({UP}{w['log']}))."
            )
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
    q = _d(data.get("quality"))
    scale = q.get("budget_scale")
    if isinstance(scale, int | float) and scale != 1:
        cut = sum(
            1
            for r in (_d(x) for x in _l(q.get("table")))
            for a in _l(r.get("attempts"))
            if a == "cut"
        )
        total = sum(len(_l(_d(x).get("attempts"))) for x in _l(q.get("table")))
        out.append(
            f"Quality budgets were scaled to {scale:g} of the declared ones (the table shows "
            f"both); {cut} of {total} attempts were cut by the budget sent."
        )
    ab = data.get("ab") or {}
    p = ab_section.paired(ab).get("decode_tok_s")
    if p:
        acc = _d(ab.get("acceptance"))
        runs = _d(_metric(ab, "decode_tok_s").get("runs")).get("candidate")
        drafts = f", {acc['drafts']:,} drafts" if isinstance(acc.get("drafts"), int) else ""
        out.append(
            f"Sample size: the A/B compares {p.get('pairs')} request pairs over "
            f"{p.get('prompts')} prompts and {runs} runs per lane{drafts}; an interval from so "
            "few is wide, and one marked too few samples is no result."
        )
    return out


def _stages(record: DecisionRecord) -> dict[str, StageOutcome]:
    """Every registered stage, so a stage that was never planned still says why it is absent."""
    found = {s.stage: s for s in record.evaluation.stages}
    for name in stage_names():
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
        if len(other) > 6:
            n = sum(g.status in ("blocks", "vetoes") for g in mine)
            rest = len(other) - n
            text = f"{n} block (listed by cause above)" + (f", {rest} other" if rest else "")
        else:
            text = ", ".join(other)
        out.append({"stage": stage, "passed": f"{ok}/{len(mine)}", "other": text})
    return out


def plot_plan(run: RunDir, record: DecisionRecord, view: RunView | None = None) -> list[plots.Plot]:
    """The plots of this decision, with their points (nothing drawn)."""
    view = run_view(run, record) if view is None else view
    return plots.plan(run, _data(view, record), view.dirs())


def _data(view: RunView, record: DecisionRecord) -> dict[str, dict[str, Any]]:
    """Each stage's `data`, as the run view read it once; {} for a stage with none."""
    have = view.data()
    return {s.stage: have.get(s.stage, {}) for s in record.evaluation.stages}


_LOG = re.compile(r"; log: ([^;]+)")
_QUOTED = re.compile(r"«(.*?)»")


def _not_qualified(run: RunDir, record: DecisionRecord) -> dict[str, Any] | None:
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
    if link is None:
        for lane in ("candidate", "control"):
            for d in reversed(run.attempt_dirs(f"server-{lane}")):
                logs = sorted(d.glob("stderr.*.log"))
                if logs:
                    link = _rel(run, logs[-1])
                    break
            if link:
                break
    stages = [f"{s.stage} ({_stopped(s)})" for s in record.evaluation.stages if s.planned]
    return {
        "cause": cause_of(reason) if reason else "no stage reached a judged gate",
        "lines": [short(x, LINE_MAX) for x in _QUOTED.findall(reason)],
        "log": link,
        "stages": ", ".join(stages) or "none planned",
    }


def _stopped(s: StageOutcome) -> str:
    """`aborted` for the stage the run stopped in, `not run` for those after it."""
    said = [r for a in s.superseded for r in a.reasons]
    if any(a.status == "aborted" for a in s.superseded) and not all(
        r.startswith("not run:") for r in said
    ):
        return "aborted"
    return "not run"


def _ab_result(ab: dict[str, Any]) -> str:
    """The A/B result for the candidate's change, in one sentence."""
    m = _metric(ab, "decode_tok_s")
    if not m:
        return "no A/B ran, so the change was not measured against its control"
    p = ab_section.paired(ab).get("decode_tok_s")
    acc = _d(ab.get("acceptance"))
    drafts = acc.get("drafts")
    text = (
        f"decode {_value(m.get('candidate'), 'tok/s')} against {_value(m.get('control'), 'tok/s')}"
        f" ({_delta(sections_delta(m))}, median of {ab_section.runs_of(m)}); paired per request "
        f"{ab_section.paired_text(p)}"
    )
    if isinstance(drafts, int):
        text += f"; {drafts:,} drafts"
    return text


def _outcome(
    record: DecisionRecord, data: dict[str, dict[str, Any]], groups: list[causes.Cause]
) -> dict[str, str]:
    """The outcome in words: verdict, what the change is, the A/B result, the causes."""
    ab = data.get("ab") or {}
    control = _lane_name(ab, "control") if ab.get("lanes") else None
    variable = causes.variable_of(_d(ab.get("lanes")))
    named = "what its control names: "
    if not control:
        change = f"{record.candidate} has no A/B control in this run"
    elif variable.startswith(named):
        change = (
            f"{record.candidate} against its control `{control}` ({variable.removeprefix(named)})"
        )
    else:
        change = f"{record.candidate} changes {variable} against its control `{control}`"
    verdict = "Promote" if record.promote else "No-promote"
    if record.promote and record.evaluation.waived:
        verdict = f"Promote with {len(record.evaluation.waived)} waiver(s)"
    gates = sum(len(c.keys) for c in groups)
    why = (
        f"{gates} blocking item(s) come down to {len(groups)} cause(s): {_tag_counts(groups)}."
        if groups
        else "Nothing blocks."
    )
    return {
        "text": f"**{verdict}.** {change}: {_ab_result(ab)}. {why}",
        "next": groups[0].action if groups else _exit(record, groups),
        "variable": variable,
    }


def _decision(
    record: DecisionRecord, groups: list[causes.Cause], alias: str, nq: dict[str, Any] | None
) -> str:
    """The closing paragraph, in the seed report's shape: what to do with the recipe, until
    when, and what happens to the alias."""
    if nq is not None:
        return (
            f"Nothing was decided about {record.candidate}: the run stopped before any stage "
            f"judged it ({nq['cause']}). Fix that and run it again; this decision {alias}, "
            "and it does not move."
        )
    if record.promote:
        return (
            f"Promote {record.candidate}: this decision {alias}; `qualify alias set` may point it "
            f"at this run under policy {record.policy_sha256[:16]}. {_exit(record, groups)}"
        )
    titles = "; ".join(f"{c.title} ({c.label})" for c in groups[:FIRST_SCREEN_CAUSES])
    return (
        f"Keep {record.candidate} no-promote until a fresh run clears {len(groups)} cause(s): "
        f"{titles}; or until the house policy is reviewed and changed before a run, never "
        f"after seeing this result. This decision {alias}; it does not move."
    )


def _why_not(s: StageOutcome) -> str:
    """Why a stage did not run, the stop reason shortened to its cause (said once above)."""
    why = s.why_not or "not run"
    if "aborted" in why:
        return "the run stopped before it finished; the cause is under Failed attempts"
    return why


def attempt_dir(run: RunDir, record: DecisionRecord) -> Path:
    return run.path / "decision" / f"attempt-{record.attempt:03d}"


def context(
    run: RunDir, record: DecisionRecord, info: dict[str, Any], view: AliasView | None = None
) -> dict[str, Any]:
    """Everything the template shows, computed from the run, its decision record and the alias
    it gates (read from the house when not given)."""
    seen = run_view(run, record)
    data = _data(seen, record)
    gates = record.evaluation.gates
    stages = _stages(record)
    times = [t for v in seen.stages.values() for t in (v.result.started_at, v.result.ended_at)]
    once = Once()
    variable = causes.variable_of(_d(_d(data.get("ab")).get("lanes")))
    groups = causes.group(record, variable)
    rows = _cause_rows(run, record, groups, once)
    here = attempt_dir(run, record)
    figures = _plots(plot_plan(run, record, seen), here)
    view = alias_view(run, record) if view is None else view
    alias = _alias(view, data)
    nq = _not_qualified(run, record)
    return _stage_sections(data, gates) | {
        "r": record,
        "up": UP,
        "nq": nq,
        "prov": _provenance(record, info),
        "stage": stages,
        "why_not": {k: _why_not(v) for k, v in stages.items()},
        "window": (min(times), max(times)) if times else None,
        "alias": alias,
        "against": _against(view),
        "hardware": _hardware(data, info, run),
        "figures": _figures(data, gates),
        "outcome": _outcome(record, data, groups),
        "causes": rows,
        "first_screen_causes": FIRST_SCREEN_CAUSES,
        "exit": _exit(record, groups),
        "decision": _decision(record, groups, alias, nq),
        "policy": _policy(record),
        "launch": _launch(run, data),
        "fidelity": sections.fidelity(data, gates),
        "plot": figures,
        "failed": _failed_attempts(record, once),
        "caveats": _caveats(record, info, data, once, run.path),
        "gate_summary": _gate_summary(record),
        "tickets": _tickets(record),
        "record_written": (here / "decision.json").is_file(),
    }


def _plots(plan: list[plots.Plot], here: Path) -> dict[str, dict[str, Any]]:
    """Each plot by its template name: drawn into the decision attempt, or why not."""
    return {
        p.name.removesuffix(".png").replace("-", "_"): {
            "name": p.name,
            "title": p.title,
            "drawn": (here / p.name).is_file(),
            "missing": p.missing if p.empty else "not drawn: a preview draws no plots",
        }
        for p in plan
    }


def _stage_sections(data: dict[str, dict[str, Any]], gates: list[GateOutcome]) -> dict[str, Any]:
    """What each registered stage's section module gives the template, from its `data` and the
    decision's gates (`qualify.registry.section_module`)."""
    out: dict[str, Any] = {}
    for name in stage_names():
        module = section_module(name)
        build = getattr(module, "section", None)
        if build is not None:
            out |= build(data.get(name) or {}, gates)
    return out


def _tickets(record: DecisionRecord) -> dict[str, Any]:
    """The tickets as a table when few, else counted by what this decision did to them."""
    counts: dict[str, int] = {}
    for t in record.tickets:
        counts[t.action] = counts.get(t.action, 0) + 1
    return {
        "table": len(record.tickets) <= FIRST_SCREEN_CAUSES,
        "summary": ", ".join(f"{n} {a}" for a, n in counts.items()),
    }


def render(
    run: RunDir, record: DecisionRecord, info: dict[str, Any], view: AliasView | None = None
) -> str:
    return environment().get_template(TEMPLATE).render(**context(run, record, info, view))


def write_plots(run: RunDir, record: DecisionRecord) -> list[tuple[str, bytes]]:
    """The PNGs of this decision, to be written beside decision.md before it is rendered."""
    return plots.drawn(plot_plan(run, record))
