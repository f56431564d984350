"""The context ladder's judges, declared in `gates/context/*.yaml`, reading the stage's typed
record (`qualify.context.record.Record`). A per-rung verdict is named by the size the rung
actually ran (`needles@7936` for a target of 16384 clamped to the window), never by its target.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from qualify.context.battery import CaseName, judge_case
from qualify.context.record import Record, Row, Rung, Stream, TaskCheck
from qualify.context.tasks import TASK_KINDS, TaskKind
from qualify.gates.files import Params
from qualify.gates.registry import Judged, judge
from qualify.gates.thresholds import Thresholds
from qualify.httpclient.degenerate import degenerate_verdict
from qualify.httpclient.timing import fidelity_verdict
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


def _rung_frame(
    data: Record, rung: Rung
) -> tuple[list[Row], list[Verdict], list[str], dict[str, object]]:
    """The rung's rows, `error` where the rung broke, the note a clamped rung carries and why it
    broke, and the metrics naming its target."""
    rows = [r for r in data.rows if r.target == rung.target]
    metrics: dict[str, object] = {
        "target": rung.target,
        "planned_tokens": rung.planned_tokens,
        "clamped": rung.clamped,
        "window": rung.window,
    }
    reasons = list(rung.errors)
    if rung.clamped:
        targets = [rung.target] + [t.target for t in data.targets if t.same_as == rung.target]
        note = (
            f"target {', '.join(map(str, targets))}, clamped to {rung.planned_tokens} "
            f"(per-request window {rung.window} minus the completion margin)"
        )
        metrics.update(note=note, targets=targets)
        reasons.insert(0, note)
    return rows, [Verdict.ERROR] if rung.errors else [], reasons, metrics


@judge(STAGE, "needles", NeedlesParams)
def needles(data: Record, params: NeedlesParams, thresholds: Thresholds) -> list[Judged]:
    """Per rung: pass when every timed stream named every needle; one miss fails (the deep needle
    alone is not enough); a broken cell or rung is `error`."""
    out: list[Judged] = []
    for rung in data.rungs:
        rows, verdicts, reasons, metrics = _rung_frame(data, rung)
        found = {str(d): 0 for d in params.depths}
        streams = 0
        for row in rows:
            if row.verdict == Verdict.ERROR.value:
                verdicts.append(Verdict.ERROR)
                reasons.extend(f"{row.where}: {why}" for why in row.reasons)
                continue
            for i, s in enumerate(row.streams):
                streams += 1
                missed = [d for d in params.depths if not s.needles.get(str(d))]
                for d in params.depths:
                    found[str(d)] += d not in missed
                verdicts.append(Verdict.FAIL if missed else Verdict.PASS)
                info = rung.contents.get(row.content)
                values = {n.depth: f" ({n.value})" for n in info.needles} if info else {}
                reasons.extend(
                    f"{row.where} stream {i + 1} missed the {d}% needle{values.get(d, '')}; "
                    f"answer {s.answer[:160]!r}"
                    + (" (cut at max_tokens)" if s.finish_reason == "length" else "")
                    for d in missed
                )
        if not verdicts:
            verdicts, reasons = [Verdict.INCONCLUSIVE], [*reasons, "no cell ran at this rung"]
        metrics.update(streams=streams, **{f"found_{d}": n for d, n in found.items()})
        out.append(Judged(worst(verdicts), reasons, metrics, part=rung.part))
    return out


def _cached(row: Row, stream: Stream) -> int | None:
    if stream.cached_tokens is not None:
        return stream.cached_tokens
    delta = row.cached_tokens_metric_delta
    return None if delta is None else round(delta / (row.concurrency or 1))


@judge(STAGE, "cold-cache", ColdCacheParams)
def cold_cache(data: Record, params: ColdCacheParams, thresholds: Thresholds) -> list[Judged]:
    """Per rung: pass when every cold stream reports (almost) no cached prompt tokens; more fails
    ("the prefix cache flattered it"); no cached-token count at all is inconclusive."""
    out: list[Judged] = []
    for rung in data.rungs:
        rows, verdicts, reasons, metrics = _rung_frame(data, rung)
        cold = [r for r in rows if r.pass_ == "cold"]
        warm = [r for r in rows if r.pass_ == "warm"]
        seen: list[list[int | None]] = []
        for row in cold:
            if not row.streams:
                verdicts.append(Verdict.ERROR)
                reasons.append(f"{row.where}: not run ({'; '.join(row.reasons)})")
            for s in row.streams:
                cached, prompt = _cached(row, s), s.actual_prompt_tokens
                seen.append([cached, prompt])
                limit = params.limit(prompt)
                if s.problem:
                    verdicts.append(Verdict.ERROR)
                    reasons.append(f"{row.where}: {s.problem}")
                elif cached is None:
                    verdicts.append(Verdict.INCONCLUSIVE)
                    reasons.append(f"{row.where}: the server reports no cached-token count")
                elif cached > limit:
                    verdicts.append(Verdict.FAIL)
                    reasons.append(
                        f"{row.where}: cached {cached} of {prompt} prompt tokens "
                        f"(expected at most {limit}): the prefix cache flattered it"
                    )
                else:
                    verdicts.append(Verdict.PASS)
        if not verdicts:
            verdicts, reasons = [Verdict.INCONCLUSIVE], [*reasons, "no cold cell ran at this rung"]
        metrics.update(
            cold_cached_prompt=seen,
            warm_cached_prompt=[
                [_cached(r, s), s.actual_prompt_tokens] for r in warm for s in r.streams
            ],
            cold_metric_delta=[r.cached_tokens_metric_delta for r in cold],
            warm_metric_delta=[r.cached_tokens_metric_delta for r in warm],
        )
        out.append(Judged(worst(verdicts), reasons, metrics, part=rung.part))
    return out


@judge(STAGE, "context-idle", IdleParams)
def idle(data: Record, params: IdleParams, thresholds: Thresholds) -> list[Judged]:
    """Pass when the engine was idle before and after every timed cell; busy is `error` (the
    cell is not counted); no idle gauges is inconclusive."""
    verdicts: list[Verdict] = []
    reasons: list[str] = []
    waited = [0.0]
    for row in data.rows:
        for when, rep in (("before", row.idle.before), ("after", row.idle.after)):
            if rep is None:
                continue
            waited.append(rep.waited_s)
            where = f"{row.planned_tokens} {row.where} ({when})"
            if rep.idle is True:
                verdicts.append(Verdict.PASS)
            elif rep.idle is None:
                verdicts.append(Verdict.INCONCLUSIVE)
                reasons.append(f"{where}: {rep.reason}")
            else:
                verdicts.append(Verdict.ERROR)
                reasons.append(f"{where}: {rep.reason}; the cell is not counted")
    if not verdicts:
        verdicts, reasons = [Verdict.INCONCLUSIVE], ["no timed cell ran"]
    metrics = {"checks": len(verdicts), "max_waited_s": max(waited)}
    return [Judged(worst(verdicts), reasons, metrics)]


@judge(STAGE, "context-fidelity", FidelityParams)
def fidelity(data: Record, params: FidelityParams, thresholds: Thresholds) -> list[Judged]:
    """Per concurrency: fail when the client's median decode tok/s differs from the server's by
    more than `fidelity_decode_tolerance`, or TTFT minus the server's prompt time lies outside
    [0, `ttft_bound_ms(engine, c)`]; no server figures is inconclusive
    (`qualify.httpclient.timing.fidelity_verdict`, the A/B's rule too)."""
    by_c = data.fidelity.by_concurrency
    if not by_c:
        return [Judged(Verdict.INCONCLUSIVE, ["no counted stream to compare with the server"])]
    out: list[Judged] = []
    for c, summary in sorted(by_c.items(), key=lambda kv: int(kv[0])):
        bound = thresholds.ttft_bound_ms(data.fidelity.engine, int(c))
        tol = thresholds.fidelity_decode_tolerance
        metrics = {**summary.model_dump(), "decode_tolerance": tol, "ttft_bound_ms": bound}
        verdict, reasons = fidelity_verdict(summary, tol, bound)
        out.append(Judged(verdict, reasons, metrics, part=f"c={c}"))
    return out


@judge(STAGE, "context-degenerate", DegenerateParams)
def degenerate(data: Record, params: DegenerateParams, thresholds: Thresholds) -> list[Judged]:
    """Fail when more than `max_streams` answers were degenerate (one n-gram repeating, a digit
    run): they are kept and listed, and left out of every speed figure; no counted stream is
    inconclusive (`qualify.httpclient.degenerate.degenerate_verdict`)."""
    counted = sum(1 for r in data.rows for s in r.streams if not s.problem)
    metrics = {"streams": counted, "degenerate": len(data.degenerate)}
    flagged = [
        f"{d.planned_tokens} {d.pass_} {d.content} c={d.concurrency} stream {d.stream}: {d.reason}"
        for d in data.degenerate
    ]
    verdict, reasons = degenerate_verdict(flagged, counted, params.max_streams)
    return [Judged(verdict, reasons, metrics)]


# --- the audits: RULER-style tasks, garble over every answer, the deep tool battery ----------


class TasksParams(Params):
    kinds: list[TaskKind] = Field(
        default_factory=lambda: list(TASK_KINDS),
        min_length=1,
        description="task kinds every timed answer of a rung must get right",
    )


def _task_answers(data: Record, rung: Rung) -> list[tuple[str, str, TaskCheck]]:
    """(where, kind, check) for every judged task answer at the rung."""
    out: list[tuple[str, str, TaskCheck]] = []
    for row in data.rows:
        if row.target != rung.target or row.verdict == Verdict.ERROR.value:
            continue
        for i, s in enumerate(row.streams):
            if s.problem:
                continue
            where = f"{row.where} stream {i + 1} (numbered answer)"
            out.extend((where, kind, check) for kind, check in s.tasks.items())
    for content, info in rung.contents.items():
        where = f"warm {content} (own question)"
        out.extend((where, a.kind, a.check) for a in info.asked if not a.problem)
    return out


def _check_text(kind: str, check: TaskCheck) -> str:
    if kind == "aggregation":
        return f"counted {check.said}, expected {check.expected}"
    parts = []
    if check.missed:
        parts.append(f"missed {check.missed}")
    if check.wrong:
        parts.append(f"named the decoys {check.wrong}")
    return ", ".join(parts) or "wrong"


@judge(STAGE, "context-tasks", TasksParams)
def tasks(data: Record, params: TasksParams, thresholds: Thresholds) -> list[Judged]:
    """Per rung: pass when every judged answer got every task of `params.kinds` right, warm
    and cold (published apart in `data.audits.by_kind`); one wrong answer fails; a rung too
    small to hold the tasks, or where none was asked, is inconclusive."""
    out: list[Judged] = []
    by_kind = data.audits.by_kind if data.audits else []
    for rung in data.rungs:
        rows, verdicts, reasons, metrics = _rung_frame(data, rung)
        seen = {k: 0 for k in params.kinds}
        for where, kind, check in _task_answers(data, rung):
            if kind not in seen:
                continue
            seen[kind] += 1
            verdicts.append(Verdict.PASS if check.passed else Verdict.FAIL)
            if not check.passed:
                reasons.append(f"{where}: {kind} {_check_text(kind, check)}")
        if any(r.verdict == Verdict.ERROR.value for r in rows):
            verdicts.append(Verdict.ERROR)
            reasons.append("a cell of this rung broke (see context/needles)")
        if missing := [k for k, n in seen.items() if n == 0]:
            verdicts.append(Verdict.INCONCLUSIVE)
            notes = [c.tasks_note for c in rung.contents.values()]
            why = next((n for n in notes if n), "no answer judged")
            reasons.append(f"{', '.join(missing)}: {why}")
        metrics["by_kind"] = [
            e.model_dump(include={"content", "kind", "pass_", "form", "depths", "asked", "passed"})
            for e in by_kind
            if e.planned_tokens == rung.planned_tokens and e.kind in seen
        ]
        out.append(Judged(worst(verdicts), reasons, metrics, part=rung.part))
    return out


class GarbleParams(Params):
    run_limit: Annotated[int, Field(ge=2)] = Field(
        18, description="this many of one character in a row fails"
    )
    script: str = Field("LATIN", description="the expected script (a Unicode name prefix)")
    max_foreign_share: Annotated[float, Field(ge=0, le=1)] = 0.2


def _rung_answers(data: Record, rung: Rung) -> list[tuple[str, str]]:
    """(where, visible text) for every answer given at the rung: warm-ups, cells, tasks, the
    tool battery."""
    out: list[tuple[str, str]] = []
    for content, info in rung.contents.items():
        out.extend((f"{content} warm-up {w.n}", w.answer) for w in info.warmups)
        out.extend((f"warm {content} task {a.kind}", a.answer) for a in info.asked)
    for row in data.rows:
        if row.target == rung.target:
            out.extend((f"{row.where} stream {i + 1}", s.answer) for i, s in enumerate(row.streams))
    bat = data.battery
    if bat is not None and bat.target == rung.target:
        out.extend((f"tool battery {c.case}", c.answer) for c in bat.cases)
    return out


@judge(STAGE, "context-garble", GarbleParams)
def garbled(data: Record, params: GarbleParams, thresholds: Thresholds) -> list[Judged]:
    """Per rung: pass when every visible answer given at the rung is clean text (no leaked
    markup or special tokens, no long run of one character, no drift into another script);
    a rung with no visible answer at all is inconclusive."""
    out: list[Judged] = []
    for rung in data.rungs:
        _, _, reasons, metrics = _rung_frame(data, rung)
        del reasons[len(reasons) - len(rung.errors) :]  # the clamp note only: not why it broke
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
        verdict = Verdict.FAIL if bad else Verdict.PASS if answers else Verdict.INCONCLUSIVE
        out.append(Judged(verdict, reasons, metrics, part=rung.part))
    return out


class ToolsParams(Params):
    case: CaseName = Field(description="which request of the battery the gate judges")


@judge(STAGE, "context-tools", ToolsParams)
def deep_tools(data: Record, params: ToolsParams, thresholds: Thresholds) -> list[Judged]:
    """At the deepest rung: pass when the battery's `case` answered right (a valid typed call,
    reassembled from a stream with its id, or an answer using the tool's result); a broken
    exchange or an unsized prompt is `error`; a battery that did not run is inconclusive."""
    bat = data.battery
    if bat is None:
        return [Judged(Verdict.INCONCLUSIVE, ["the tool battery did not run (no rung ran)"])]
    part = str(bat.planned_tokens or bat.target)
    metrics: dict[str, object] = {
        "target": bat.target,
        "planned_tokens": bat.planned_tokens,
        "sizing": bat.sizing.model_dump() if bat.sizing else None,
    }
    rec = next((c for c in bat.cases if c.case == params.case), None)
    if bat.errors or rec is None:
        verdict = Verdict.ERROR if bat.errors else Verdict.INCONCLUSIVE
        reasons = list(bat.errors) or [f"{params.case}: not asked"]
        return [Judged(verdict, reasons, metrics, part=part)]
    metrics.update(
        finish_reason=rec.finish_reason,
        prompt_tokens=rec.prompt_tokens,
        cached_tokens=rec.cached_tokens,
        tool_calls=[c.model_dump() for c in rec.tool_calls],
        files=rec.files,
    )
    if rec.problem:
        return [Judged(Verdict.ERROR, [f"{params.case}: {rec.problem}"], metrics, part=part)]
    if rec.http_status is not None and rec.http_status >= 400:
        why = f"{params.case}: rejected with HTTP {rec.http_status} at {bat.planned_tokens} tokens"
        return [Judged(Verdict.FAIL, [why], metrics, part=part)]
    problems = judge_case(rec, bat.tools)
    verdict = Verdict.FAIL if problems else Verdict.PASS
    return [Judged(verdict, [f"{params.case}: {p}" for p in problems], metrics, part=part)]


# --- acceptance at depth (`gates/context/acceptance-depth.yaml`) ------------------------------
# Each timed cell keeps the draft acceptance between the idle scrapes around it (`acceptance`,
# the server's counter deltas: `qualify.ab.acceptance`). Per rung, the counted cells' counts are
# summed; the gate gives one verdict per rung deeper than the shallowest rung that drafted: its
# acceptance rate as a share of the shallowest rung's, failing under the house's
# `context_min_acceptance_ratio`. An engine that drafts nothing has "no speculation" (skipped,
# never a pass); a rung that drafted nothing while the shallowest did is inconclusive.


class NoParams(Params):
    pass


def rung_acceptance(data: Record) -> dict[int, tuple[int, int]]:
    """(accepted, draft tokens) per rung target over its counted cells that drafted."""
    out: dict[int, tuple[int, int]] = {}
    for row in data.rows:
        a = row.acceptance
        if row.verdict == Verdict.ERROR.value or a is None or not a.draft_tokens:
            continue
        got, tokens = out.get(row.target, (0, 0))
        out[row.target] = (got + (a.accepted or 0), tokens + a.draft_tokens)
    return out


@judge(STAGE, "context-acceptance-depth", NoParams)
def acceptance_depth(data: Record, params: NoParams, thresholds: Thresholds) -> list[Judged]:
    """Per rung deeper than the shallowest that drafted: its draft acceptance rate at least the
    house's `context_min_acceptance_ratio` of the shallowest rung's; no speculation is skipped."""
    if not any(r.acceptance is not None for r in data.rows):
        return [Judged(Verdict.SKIPPED, ["acceptance per rung not measured"])]
    counts = rung_acceptance(data)
    if not counts:
        why = "no speculation: no cell of the ladder drafted a token (server counters)"
        return [Judged(Verdict.SKIPPED, [why])]
    floor = thresholds.context_min_acceptance_ratio
    base_target = min(counts)
    base_acc, base_tok = counts[base_target]
    base = base_acc / base_tok
    out = []
    for rung in data.rungs:
        if rung.target <= base_target:
            continue
        m: dict[str, object] = {"shallowest": base_target, "shallowest_rate": base, "floor": floor}
        if rung.target not in counts:
            why = f"no counted cell at this rung drafted a token (the shallowest: {base:.3g})"
            out.append(Judged(Verdict.INCONCLUSIVE, [why], m, part=rung.part))
            continue
        acc, tok = counts[rung.target]
        rate = acc / tok
        ratio = rate / base if base else None
        m.update(rate=rate, ratio=ratio, accepted=acc, draft_tokens=tok)
        said = f"acceptance {rate:.3g} at this rung, {base:.3g} at the shallowest ({base_target})"
        verdict = Verdict.PASS
        if ratio is not None and ratio < floor:
            verdict = Verdict.FAIL
            said += f": {ratio:.0%} of it, under the floor {floor:.0%}"
            said += " (thresholds.context_min_acceptance_ratio)"
        out.append(Judged(verdict, [said], m, part=rung.part))
    if not out:
        why = f"only the shallowest rung ({base_target}) drafted: nothing deeper to compare"
        return [Judged(Verdict.INCONCLUSIVE, [why], {"shallowest": base_target})]
    return out
