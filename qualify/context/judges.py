"""The context ladder's judges, declared in `gates/context/*.yaml`, reading the stage's data.

- `needles` and `cold-cache`: one verdict per rung, named by the size the rung actually ran
  (`needles@7936` for a target of 16384 clamped to the window), never by its target;
- `context-idle`: the engine was idle around every timed cell;
- `context-fidelity`: one verdict per concurrency, the client's timings against the server's;
- `context-degenerate`: no answer a drafter could accept wholesale (advisory);
- `context-tasks`: per rung, the RULER-style tasks answered right, warm and cold;
- `context-garble`: per rung, every visible answer given there is clean text;
- `context-tools`: the deep tool battery's case (typed, streaming, tool-result) answered right.

`data` is what `qualify.context.stage` stores: `targets` (rungs), `rows` (cells), `fidelity`
(with `engine` and `by_concurrency`), `degenerate` (the flagged streams), `audits` (the tasks'
counts) and `battery` (the tool battery's exchanges).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from qualify.context.battery import CaseName, judge_case
from qualify.context.tasks import TASK_KINDS, TaskKind
from qualify.gates.files import Params
from qualify.gates.registry import Judged, judge
from qualify.gates.thresholds import Thresholds
from qualify.httpclient.timing import fidelity_reasons
from qualify.preflight.checks.text import garble as find_garble
from qualify.records import Verdict, worst

STAGE = "context"
Depth = Literal[50, 99]


class NeedlesParams(Params):
    depths: list[Depth] = Field(
        default_factory=lambda: list[Depth]([50, 99]),
        min_length=1,
        description="needle depths (% of the document) every timed stream must name",
    )


class ColdCacheParams(Params):
    max_cached_share: Annotated[float, Field(ge=0, le=1)] = Field(
        0.01, description="share of a cold prompt the prefix cache may serve"
    )
    min_allowance: Annotated[int, Field(ge=0)] = Field(
        32,
        description="cached tokens always allowed: the role header before the nonce, or one "
        "cache block of a block-based engine",
    )

    def limit(self, prompt_tokens: int | None) -> int:
        """Most cached tokens a cold request of this size may report."""
        return max(self.min_allowance, int((prompt_tokens or 0) * self.max_cached_share))


class IdleParams(Params):
    pass


class FidelityParams(Params):
    pass


class DegenerateParams(Params):
    max_streams: Annotated[int, Field(ge=0)] = Field(
        0, description="degenerate answers tolerated over the whole ladder"
    )


def _where(row: dict[str, Any]) -> str:
    return f"{row['pass']} {row['content']} c={row['concurrency']}"


def _rungs(data: dict[str, Any]) -> list[dict[str, Any]]:
    """The rungs that ran: a target clamped to the size of an earlier rung is not run again."""
    return [t for t in data.get("targets", []) if t.get("same_as") is None]


def _part(rung: dict[str, Any]) -> str:
    planned = int(rung["planned_tokens"])
    return str(planned if planned > 0 else rung["target"])


def _rung_frame(
    data: dict[str, Any], rung: dict[str, Any]
) -> tuple[list[dict[str, Any]], list[str], dict[str, Any]]:
    """The rung's rows, the note a clamped rung carries, and the metrics naming its target."""
    rows = [r for r in data.get("rows", []) if r["target"] == rung["target"]]
    targets = [rung["target"]] + [
        t["target"] for t in data.get("targets", []) if t.get("same_as") == rung["target"]
    ]
    metrics: dict[str, Any] = {
        "target": rung["target"],
        "planned_tokens": rung["planned_tokens"],
        "clamped": rung["clamped"],
        "window": rung["window"],
    }
    notes: list[str] = []
    if rung["clamped"]:
        names = ", ".join(str(t) for t in targets)
        metrics["note"] = (
            f"target {names}, clamped to {rung['planned_tokens']} (per-request window "
            f"{rung['window']} minus the completion margin)"
        )
        metrics["targets"] = targets
        notes.append(metrics["note"])
    return rows, notes, metrics


def _needle_value(rung: dict[str, Any], content: str, depth: int) -> str:
    for n in (rung.get("contents", {}).get(content) or {}).get("needles", []):
        if n.get("depth") == depth:
            return f" ({n['value']})"
    return ""


@judge(STAGE, "needles", NeedlesParams)
def needles(data: dict[str, Any], params: NeedlesParams, thresholds: Thresholds) -> list[Judged]:
    """Per rung: pass when every timed stream named every needle; one miss fails (the deep needle
    alone is not enough); a broken cell or rung is `error`."""
    out: list[Judged] = []
    for rung in _rungs(data):
        rows, reasons, metrics = _rung_frame(data, rung)
        verdicts = [Verdict.ERROR] if rung["errors"] else []
        reasons.extend(rung["errors"])
        found = {str(d): 0 for d in params.depths}
        streams = 0
        for row in rows:
            if row["verdict"] == Verdict.ERROR.value:
                verdicts.append(Verdict.ERROR)
                reasons.extend(f"{_where(row)}: {why}" for why in row["reasons"])
                continue
            for i, s in enumerate(row.get("streams", [])):
                streams += 1
                missed = [d for d in params.depths if not s["needles"].get(str(d))]
                for d in params.depths:
                    found[str(d)] += 0 if d in missed else 1
                verdicts.append(Verdict.FAIL if missed else Verdict.PASS)
                reasons.extend(
                    f"{_where(row)} stream {i + 1} missed the {d}% needle"
                    f"{_needle_value(rung, row['content'], d)}; answer {s['answer'][:160]!r}"
                    + (" (cut at max_tokens)" if s.get("finish_reason") == "length" else "")
                    for d in missed
                )
        if not verdicts:
            verdicts = [Verdict.INCONCLUSIVE]
            reasons.append("no cell ran at this rung")
        metrics.update(streams=streams, **{f"found_{d}": n for d, n in found.items()})
        out.append(Judged(worst(verdicts), reasons, metrics, part=_part(rung)))
    return out


def _cached(row: dict[str, Any], stream: dict[str, Any]) -> int | None:
    if isinstance(stream.get("cached_tokens"), int):
        return int(stream["cached_tokens"])
    delta = row.get("cached_tokens_metric_delta")
    n = row.get("concurrency") or 1
    return None if delta is None else round(delta / n)


@judge(STAGE, "cold-cache", ColdCacheParams)
def cold_cache(
    data: dict[str, Any], params: ColdCacheParams, thresholds: Thresholds
) -> list[Judged]:
    """Per rung: pass when every cold stream reports (almost) no cached prompt tokens; more fails
    ("the prefix cache flattered it"); no cached-token count at all is inconclusive."""
    out: list[Judged] = []
    for rung in _rungs(data):
        rows, reasons, metrics = _rung_frame(data, rung)
        cold = [r for r in rows if r["pass"] == "cold"]
        warm = [r for r in rows if r["pass"] == "warm"]
        verdicts = [Verdict.ERROR] if rung["errors"] else []
        reasons.extend(rung["errors"])
        seen: list[list[int | None]] = []
        for row in cold:
            if not row.get("streams"):
                verdicts.append(Verdict.ERROR)
                reasons.append(f"{_where(row)}: not run ({'; '.join(row['reasons'])})")
            for s in row.get("streams", []):
                cached, prompt = _cached(row, s), s["actual_prompt_tokens"]
                seen.append([cached, prompt])
                limit = params.limit(prompt)
                if s["problem"]:
                    verdicts.append(Verdict.ERROR)
                    reasons.append(f"{_where(row)}: {s['problem']}")
                elif cached is None:
                    verdicts.append(Verdict.INCONCLUSIVE)
                    reasons.append(f"{_where(row)}: the server reports no cached-token count")
                elif cached > limit:
                    verdicts.append(Verdict.FAIL)
                    reasons.append(
                        f"{_where(row)}: cached {cached} of {prompt} prompt tokens "
                        f"(expected at most {limit}): the prefix cache flattered it"
                    )
                else:
                    verdicts.append(Verdict.PASS)
        if not verdicts:
            verdicts = [Verdict.INCONCLUSIVE]
            reasons.append("no cold cell ran at this rung")
        metrics.update(
            cold_cached_prompt=seen,
            warm_cached_prompt=[
                [_cached(r, s), s["actual_prompt_tokens"]]
                for r in warm
                for s in r.get("streams", [])
            ],
            cold_metric_delta=[r.get("cached_tokens_metric_delta") for r in cold],
            warm_metric_delta=[r.get("cached_tokens_metric_delta") for r in warm],
        )
        out.append(Judged(worst(verdicts), reasons, metrics, part=_part(rung)))
    return out


@judge(STAGE, "context-idle", IdleParams)
def idle(data: dict[str, Any], params: IdleParams, thresholds: Thresholds) -> list[Judged]:
    """Pass when the engine was idle before and after every timed cell; busy is `error` (the
    cell is not counted); no idle gauges is inconclusive."""
    verdicts: list[Verdict] = []
    reasons: list[str] = []
    waited = [0.0]
    for row in data.get("rows", []):
        for when, rep in (row.get("idle") or {}).items():
            waited.append(rep["waited_s"])
            where = f"{row['planned_tokens']} {_where(row)} ({when})"
            if rep["idle"] is True:
                verdicts.append(Verdict.PASS)
            elif rep["idle"] is None:
                verdicts.append(Verdict.INCONCLUSIVE)
                reasons.append(f"{where}: {rep['reason']}")
            else:
                verdicts.append(Verdict.ERROR)
                reasons.append(f"{where}: {rep['reason']}; the cell is not counted")
    if not verdicts:
        verdicts, reasons = [Verdict.INCONCLUSIVE], ["no timed cell ran"]
    metrics = {"checks": len(verdicts), "max_waited_s": max(waited)}
    return [Judged(worst(verdicts), reasons, metrics)]


@judge(STAGE, "context-fidelity", FidelityParams)
def fidelity(data: dict[str, Any], params: FidelityParams, thresholds: Thresholds) -> list[Judged]:
    """Per concurrency: fail when the client's median decode tok/s differs from the server's by
    more than `fidelity_decode_tolerance`, or TTFT minus the server's prompt time lies outside
    [0, `ttft_bound_ms(engine, c)`]; no server figures is inconclusive."""
    fid = data.get("fidelity") or {}
    engine = str(fid.get("engine") or "")
    by_c: dict[str, dict[str, Any]] = fid.get("by_concurrency") or {}
    if not by_c:
        return [Judged(Verdict.INCONCLUSIVE, ["no counted stream to compare with the server"])]
    out: list[Judged] = []
    for c, summary in sorted(by_c.items(), key=lambda kv: int(kv[0])):
        bound = thresholds.ttft_bound_ms(engine, int(c))
        tol = thresholds.fidelity_decode_tolerance
        metrics = {**summary, "decode_tolerance": tol, "ttft_bound_ms": bound}
        reasons = fidelity_reasons(summary, tol, bound)
        missing = [
            f"the server reported no {what} for {summary['requests']} counted requests"
            for what, n in (("decode rate", "n_decode"), ("prompt time", "n_ttft"))
            if not summary.get(n)
        ]
        if reasons:
            verdict = Verdict.FAIL
        elif missing:
            verdict, reasons = Verdict.INCONCLUSIVE, missing
        else:
            verdict = Verdict.PASS
        out.append(Judged(verdict, reasons, metrics, part=f"c={c}"))
    return out


@judge(STAGE, "context-degenerate", DegenerateParams)
def degenerate(
    data: dict[str, Any], params: DegenerateParams, thresholds: Thresholds
) -> list[Judged]:
    """Fail when more than `max_streams` answers were degenerate (one n-gram repeating, a digit
    run): they are kept and listed, and left out of every speed figure."""
    flagged: list[dict[str, Any]] = data.get("degenerate", [])
    counted = sum(1 for r in data.get("rows", []) for s in r.get("streams", []) if not s["problem"])
    metrics = {"streams": counted, "degenerate": len(flagged)}
    if not counted:
        return [Judged(Verdict.INCONCLUSIVE, ["no counted stream to read"], metrics)]
    if len(flagged) <= params.max_streams:
        return [Judged(Verdict.PASS, [], metrics)]
    reasons = [
        f"{d['planned_tokens']} {d['pass']} {d['content']} c={d['concurrency']} stream "
        f"{d['stream']}: {d['reason']}; left out of the speed figures"
        for d in flagged
    ]
    return [Judged(Verdict.FAIL, reasons, metrics)]


# --- the audits: RULER-style tasks, garble over every answer, the deep tool battery ----------


class TasksParams(Params):
    kinds: list[TaskKind] = Field(
        default_factory=lambda: list(TASK_KINDS),
        min_length=1,
        description="task kinds every timed answer of a rung must get right",
    )


def _task_answers(
    data: dict[str, Any], rung: dict[str, Any]
) -> list[tuple[str, str, str, dict[str, Any]]]:
    """(where, pass, kind, check) for every judged task answer at the rung."""
    out = []
    for row in data.get("rows", []):
        if row["target"] != rung["target"] or row["verdict"] == Verdict.ERROR.value:
            continue
        for i, s in enumerate(row.get("streams", [])):
            if s.get("problem"):
                continue
            for kind, check in (s.get("tasks") or {}).items():
                where = f"{_where(row)} stream {i + 1} (numbered answer)"
                out.append((where, row["pass"], kind, check))
    for content, info in (rung.get("contents") or {}).items():
        for a in info.get("asked") or []:
            if not a.get("problem"):
                out.append((f"warm {content} (own question)", "warm", a["kind"], a["check"]))
    return out


def _check_text(kind: str, check: dict[str, Any]) -> str:
    if kind == "aggregation":
        return f"counted {check.get('said')}, expected {check.get('expected')}"
    parts = []
    if check.get("missed"):
        parts.append(f"missed {check['missed']}")
    if check.get("wrong"):
        parts.append(f"named the decoys {check['wrong']}")
    return ", ".join(parts) or "wrong"


@judge(STAGE, "context-tasks", TasksParams)
def tasks(data: dict[str, Any], params: TasksParams, thresholds: Thresholds) -> list[Judged]:
    """Per rung: pass when every judged answer got every task of `params.kinds` right, warm
    and cold (published apart in `data.audits.by_kind`); one wrong answer fails; a rung too
    small to hold the tasks, or where none was asked, is inconclusive."""
    out: list[Judged] = []
    by_kind = (data.get("audits") or {}).get("by_kind") or []
    for rung in _rungs(data):
        rows, reasons, metrics = _rung_frame(data, rung)
        verdicts = [Verdict.ERROR] if rung["errors"] else []
        reasons.extend(rung["errors"])
        seen = {k: 0 for k in params.kinds}
        for where, _, kind, check in _task_answers(data, rung):
            if kind not in seen:
                continue
            seen[kind] += 1
            if check.get("passed"):
                verdicts.append(Verdict.PASS)
            else:
                verdicts.append(Verdict.FAIL)
                reasons.append(f"{where}: {kind} {_check_text(kind, check)}")
        if any(r["verdict"] == Verdict.ERROR.value for r in rows):
            verdicts.append(Verdict.ERROR)
            reasons.append("a cell of this rung broke (see context/needles)")
        missing = [k for k, n in seen.items() if n == 0]
        if missing:
            verdicts.append(Verdict.INCONCLUSIVE)
            notes = [(c or {}).get("tasks_note") for c in (rung.get("contents") or {}).values()]
            why = next((n for n in notes if n), "no answer judged")
            reasons.append(f"{', '.join(missing)}: {why}")
        metrics["by_kind"] = [
            {k: e[k] for k in ("content", "kind", "pass", "form", "depths", "asked", "passed")}
            for e in by_kind
            if e.get("planned_tokens") == rung["planned_tokens"] and e.get("kind") in seen
        ]
        out.append(Judged(worst(verdicts), reasons, metrics, part=_part(rung)))
    return out


class GarbleParams(Params):
    run_limit: Annotated[int, Field(ge=2)] = Field(
        18, description="this many of one character in a row fails"
    )
    script: str = Field("LATIN", description="the expected script (a Unicode name prefix)")
    max_foreign_share: Annotated[float, Field(ge=0, le=1)] = 0.2


def _rung_answers(data: dict[str, Any], rung: dict[str, Any]) -> list[tuple[str, str]]:
    """(where, visible text) for every answer given at the rung: warm-ups, cells, tasks, the
    tool battery."""
    out: list[tuple[str, str]] = []
    for content, info in (rung.get("contents") or {}).items():
        for w in info.get("warmups") or []:
            out.append((f"{content} warm-up {w['n']}", w.get("answer") or ""))
        for a in info.get("asked") or []:
            out.append((f"warm {content} task {a['kind']}", a.get("answer") or ""))
    for row in data.get("rows", []):
        if row["target"] == rung["target"]:
            for i, s in enumerate(row.get("streams", [])):
                out.append((f"{_where(row)} stream {i + 1}", s.get("answer") or ""))
    bat = data.get("battery") or {}
    if bat.get("target") == rung["target"]:
        for c in bat.get("cases") or []:
            out.append((f"tool battery {c['case']}", c.get("answer") or ""))
    return out


@judge(STAGE, "context-garble", GarbleParams)
def garbled(data: dict[str, Any], params: GarbleParams, thresholds: Thresholds) -> list[Judged]:
    """Per rung: pass when every visible answer given at the rung is clean text (no leaked
    markup or special tokens, no long run of one character, no drift into another script);
    a rung with no visible answer at all is inconclusive."""
    out: list[Judged] = []
    for rung in _rungs(data):
        _, reasons, metrics = _rung_frame(data, rung)
        answers = [(w, t) for w, t in _rung_answers(data, rung) if t.strip()]
        bad = [
            (w, p)
            for w, t in answers
            for p in find_garble(t, params.run_limit, params.script, params.max_foreign_share)
        ]
        reasons.extend(f"{w}: {p}" for w, p in bad)
        metrics.update(answers=len(answers), garbled=len({w for w, _ in bad}))
        if not answers:
            reasons.append("no visible answer at this rung")
            verdict = Verdict.INCONCLUSIVE
        else:
            verdict = Verdict.FAIL if bad else Verdict.PASS
        out.append(Judged(verdict, reasons, metrics, part=_part(rung)))
    return out


class ToolsParams(Params):
    case: CaseName = Field(description="which request of the battery the gate judges")


@judge(STAGE, "context-tools", ToolsParams)
def deep_tools(data: dict[str, Any], params: ToolsParams, thresholds: Thresholds) -> list[Judged]:
    """At the deepest rung: pass when the battery's `case` answered right (a valid typed call,
    reassembled from a stream with its id, or an answer using the tool's result); a broken
    exchange or an unsized prompt is `error`; a battery that did not run is inconclusive."""
    bat = data.get("battery")
    if not bat:
        return [Judged(Verdict.INCONCLUSIVE, ["the tool battery did not run (no rung ran)"])]
    part = str(bat.get("planned_tokens") or bat.get("target"))
    metrics = {
        "target": bat.get("target"),
        "planned_tokens": bat.get("planned_tokens"),
        "sizing": bat.get("sizing"),
    }
    if bat.get("errors"):
        return [Judged(Verdict.ERROR, list(bat["errors"]), metrics, part=part)]
    rec = next((c for c in bat.get("cases") or [] if c["case"] == params.case), None)
    if rec is None:
        return [Judged(Verdict.INCONCLUSIVE, [f"{params.case}: not asked"], metrics, part=part)]
    metrics.update(
        {k: rec.get(k) for k in ("finish_reason", "prompt_tokens", "cached_tokens", "tool_calls")}
    )
    metrics["files"] = rec.get("files")
    if rec.get("problem"):
        return [Judged(Verdict.ERROR, [f"{params.case}: {rec['problem']}"], metrics, part=part)]
    status = rec.get("http_status")
    if isinstance(status, int) and status >= 400:
        why = f"{params.case}: rejected with HTTP {status} at {bat.get('planned_tokens')} tokens"
        return [Judged(Verdict.FAIL, [why], metrics, part=part)]
    problems = judge_case(rec, bat.get("tools") or [])
    verdict = Verdict.FAIL if problems else Verdict.PASS
    return [Judged(verdict, [f"{params.case}: {p}" for p in problems], metrics, part=part)]
