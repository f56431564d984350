"""The context ladder's judged data rebuilt from the exchanges an attempt kept (`verify`).

Every timed stream, warm-up, task asked on its own and tool-battery case is read back from its
kept exchange and measured and checked again as the stage did (`ladder.stream_row`,
`Task.check`, `battery.record`): its answer, tokens, cached tokens, timings, whether it names
each needle, each task's check, whether it is degenerate. The needles and tasks a rung recorded
must be in every prompt its streams sent (a needle the prompt never held cannot be "found").
Each row's figures and verdict, the fidelity summary, the degenerate list, the speed summary
and the audits are computed again from those streams with the stage's own functions; the tool
battery's tools must be the project's battery (`gates/context/tools`) the requests carried.

Not kept raw, so taken from the sealed record (and said): the idle checks around each cell and
the cached-token counter delta (read from `/metrics`), a cell's wall span (its aggregate rate).
"""

from __future__ import annotations

import json
import re

from qualify.context import battery, ladder
from qualify.context.corpus import Needles
from qualify.context.record import (
    PASSES,
    AuditCount,
    Audits,
    Battery,
    Content,
    DegenerateStream,
    Fidelity,
    Pass,
    PassSpeed,
    Record,
    Row,
    Rung,
    Speed,
    Stream,
)
from qualify.context.tasks import Task, Tasks
from qualify.evidence.kept import AttemptView, NotKept
from qualify.httpclient.chat import ChatOutcome, from_response, from_stream
from qualify.httpclient.client import Exchange
from qualify.httpclient.timing import (
    RequestTiming,
    ServerComparison,
    fidelity,
    median,
    percentile,
    timing,
    with_server_window,
)
from qualify.httpclient.window import ServerWindow

# The checks of the audits (tasks, garble, the tool battery): a record of the form before them
# has no `audits` field, and no gates of these checks.
_AUDITS = ["context-tasks", "context-garble", "context-tools"]
_PART = re.compile(r"\.part\d{3}$")


def _kept(view: AttemptView, files: list[str], stream: bool) -> tuple[Exchange, ChatOutcome]:
    if not files:
        raise NotKept("an answer names no kept exchange")
    ex = view.exchange(_PART.sub("", files[0]))
    return ex, from_stream(ex) if stream else from_response(ex)


def _recorded(info: Content) -> tuple[Needles, Tasks]:
    """The needles and tasks the rung recorded for one content (every part of them written)."""
    if len(info.needles) != 2 or any(
        {"subject", "value"} - n.model_fields_set for n in info.needles
    ):
        raise NotKept(f"its needles are not recorded ({info.needles!r})")
    if any({"lines", "question", "expect"} - t.model_fields_set for t in info.tasks):
        raise NotKept(f"its tasks are not recorded ({info.tasks!r})")
    a, b = info.needles
    tasks = [Task.model_validate(t.model_dump()) for t in info.tasks]
    return Needles((a, b)), Tasks(tuple(tasks))


def _held(ex: Exchange, needles: Needles, tasks: Tasks, where: str) -> None:
    """Every needle value and task line the rung recorded is in the prompt this request sent."""
    sent = json.dumps(ex.request_body, ensure_ascii=False)
    missing = [n.value for n in needles.pair if n.value not in sent]
    missing += [line for _, line in tasks.lines() if json.dumps(line)[1:-1] not in sent]
    if missing:
        raise NotKept(f"{where}: its prompt does not hold {missing[:3]}, which the rung records")


def _row(
    view: AttemptView,
    row: Row,
    contents: dict[str, Content],
    timings: dict[int, list[RequestTiming]],
) -> Row:
    """The sealed row with its streams, figures and verdict derived again (in place)."""
    info = contents.get(row.content) or Content()
    needles, tasks = _recorded(info)
    streams: list[Stream] = []
    counted: list[RequestTiming] = []
    for s in row.streams:
        ex, o = _kept(view, s.files, True)
        _held(ex, needles, tasks, f"{row.target} {row.where}")
        t = timing(o)
        streams.append(ladder.stream_row(o, t, needles, s.files, tasks))
        counted.append(t)
    if row.gpu is not None:
        view.trust("each cell's per-card lowest free memory and mean power (the sampler's)")
    if row.acceptance is not None:
        view.trust("each cell's draft acceptance (the counter deltas around it)")
    if not streams:
        view.trust("the idle checks around each cell")
        return row
    row.streams = streams
    keep = _windowed(view, row, [t for t, s in zip(counted, streams, strict=True) if not s.problem])
    ladder.summarize(row, streams)
    view.trust("each cell's wall span (its aggregate rate) and cached-token counter delta")
    if any(r.startswith("not counted:") for r in row.reasons):
        view.trust("the idle checks around each cell")  # the verdict as recorded
    else:
        ladder.verdict(row, streams, needles)
        if row.verdict != "error":
            timings.setdefault(row.concurrency, []).extend(keep)
    return ladder.warm_note(row)


def _windowed(view: AttemptView, row: Row, keep: list[RequestTiming]) -> list[RequestTiming]:
    """The cell's counted timings compared with the server's latency histograms over the cell,
    as the live ladder does (`with_server_window`), from the window the sealed row kept: the
    scrapes around the cell are not kept raw, so the window is taken as recorded and the
    client's side of the comparison is derived again from the exchanges."""
    if row.server_window is None:  # a record from before the per-cell window
        return keep
    window = row.server_window.window
    if window is not None:
        view.trust("each cell's server latency-histogram window (the scrapes around it)")
    server = None if window is None else ServerWindow.from_dict(window.model_dump())
    keep, compared = with_server_window(keep, server)
    row.server_window = ServerComparison.model_validate(compared)
    return keep


def _said(o: ChatOutcome) -> dict[str, object]:
    """What an answer says, as a warm-up and a task asked on its own record it."""
    return {
        "problem": ladder.stream_problem(o),
        "answer": o.content,
        "prompt_tokens": o.prompt_tokens,
        "cached_tokens": o.cached_tokens,
    }


def _contents(view: AttemptView, contents: dict[str, Content]) -> dict[str, Content]:
    """Each content's warm-ups and tasks asked on their own, from their exchanges (in place)."""
    for kind, info in contents.items():
        needles, tasks = _recorded(info)
        for i, w in enumerate(info.warmups):
            ex, o = _kept(view, w.files, True)
            _held(ex, needles, tasks, f"{kind} warm-up {w.n}")
            info.warmups[i] = w.model_copy(update=_said(o) | {"e2e_s": o.t_end})
        by_kind: dict[str, Task] = {t.kind: t for t in tasks.items}
        for i, a in enumerate(info.asked):
            if (task := by_kind.get(a.kind)) is None:
                raise NotKept(f"{kind}: a task asked on its own is not one the rung records")
            ex, o = _kept(view, a.files, True)
            _held(ex, needles, tasks, f"{kind} task {task.kind}")
            more = {"finish_reason": o.finish_reason, "completion_tokens": o.completion_tokens}
            info.asked[i] = a.model_copy(update=_said(o) | more | {"check": task.check(o.content)})
    return contents


def _battery(view: AttemptView, bat: Battery | None) -> Battery | None:
    if bat is None:
        return bat
    from qualify.gates.files import default_gates_dir

    if bat.tools != battery.load_tools(default_gates_dir()):
        raise NotKept("the tool battery's tools are not the project's")
    cases = []
    for c in bat.cases:
        ex, o = _kept(view, c.files, c.case == "streaming")
        if (ex.request_body or {}).get("tools") != bat.tools:
            raise NotKept(f"tool battery {c.case}: its request did not carry the battery")
        cases.append(battery.record(c.case, o, c.files))
    return bat.model_copy(update={"cases": cases})


def _planned(view: AttemptView, targets: list[Rung], rows: list[Row]) -> None:
    """The rungs are the signed candidate's targets, and every rung that ran holds one row per
    content, pass and concurrency the candidate names: no cell left out."""
    assert view.candidate is not None
    s = view.candidate.stages.context
    if [t.target for t in targets] != list(s.targets):
        raise NotKept(f"its rungs are not the signed candidate's targets {s.targets}")
    have = {(r.target, r.content, r.pass_, r.concurrency) for r in rows}
    missing = sorted(
        (t.target, kind, pass_, c)
        for t in targets
        if t.same_as is None and t.planned_tokens > 0 and not t.errors
        for kind in s.content
        for pass_ in PASSES
        for c in s.concurrency
        if (t.target, kind, pass_, c) not in have
    )
    if missing:
        raise NotKept(f"cells the candidate names have no row: {missing[:3]}")


def rebuild(view: AttemptView) -> Record:
    """The context stage's record as its kept exchanges give it (see the module docstring)."""
    if view.candidate is None:
        raise NotKept("no signed candidate copy in the run")
    sealed = Record.model_validate(view.sealed)
    if not any("acceptance" in r.model_fields_set for r in sealed.rows):
        view.earlier_form(["context-acceptance-depth"], "the record predates acceptance per cell")
    if "audits" not in sealed.model_fields_set:
        view.earlier_form(_AUDITS, "the record predates the context audits (no audits field)")
    for t in sealed.targets:
        t.contents = _contents(view, t.contents)
    by_target = {t.target: t for t in sealed.targets}
    timings: dict[int, list[RequestTiming]] = {}
    rows = []
    for row in sealed.rows:
        if (rung := by_target.get(row.target)) is None:
            raise NotKept(f"a row of target {row.target} is of no rung")
        rows.append(_row(view, row, rung.contents, timings))
    _planned(view, sealed.targets, rows)
    return sealed.model_copy(
        update={
            "targets": sealed.targets,
            "rows": rows,
            "fidelity": fidelity_summary(view.candidate.identity.engine, timings),
            "degenerate": degenerate_streams(rows),
            "speed": speed_summary(rows),
            "audits": audit_summary(sealed.targets, rows),
            "battery": _battery(view, sealed.battery),
        }
    )


def fidelity_summary(engine: str, timings: dict[int, list[RequestTiming]]) -> Fidelity:
    """`qualify.httpclient.timing.fidelity` over every counted stream, and per concurrency (the
    TTFT bound depends on it: queued requests wait before the server's prompt time starts)."""
    every = [t for ts in timings.values() for t in ts]
    return Fidelity.model_validate(
        {
            **fidelity(every),
            "engine": engine,
            "by_concurrency": {str(c): fidelity(ts) for c, ts in sorted(timings.items())},
        }
    )


def degenerate_streams(rows: list[Row]) -> list[DegenerateStream]:
    """Every stream whose answer is degenerate, with where it ran: kept, and never a speed."""
    return [
        DegenerateStream(
            **{k: getattr(row, k) for k in ("target", "planned_tokens", "pass_", "content")},
            concurrency=row.concurrency,
            stream=i + 1,
            reason=s.degenerate,
            answer=s.answer[:160],
            decode_tok_s=s.decode_tok_s,
            files=s.files,
        )
        for row in rows
        for i, s in enumerate(row.streams)
        if s.degenerate and not s.problem
    ]


def _pass_speed(rows: list[Row], pass_: Pass) -> PassSpeed:
    counted = [
        (row.planned_tokens, s)
        for row in rows
        if row.pass_ == pass_ and row.verdict != "error"
        for s in row.streams
    ]
    speed = [(p, s.decode_tok_s) for p, s in counted if not s.degenerate]
    by_rung: dict[str, list[float]] = {}
    for p, v in speed:
        if v is not None:
            by_rung.setdefault(str(p), []).append(v)
    rates = [v for _, v in speed if v is not None]
    return PassSpeed(
        streams=len(counted),
        degenerate_left_out=len(counted) - len(speed),
        decode_tok_s_median=median(rates),
        decode_tok_s_p5=percentile(rates, 5),
        decode_tok_s_p95=percentile(rates, 95),
        decode_tok_s_median_by_rung={p: median(v) for p, v in by_rung.items()},
    )


def speed_summary(rows: list[Row]) -> Speed:
    """Per pass, decode tok/s over the counted streams whose answers are not degenerate, by rung
    (planned tokens) and over all rungs, with how many degenerate streams were left out."""
    return Speed(warm=_pass_speed(rows, "warm"), cold=_pass_speed(rows, "cold"))


def audit_summary(rungs: list[Rung], rows: list[Row]) -> Audits:
    """Per rung, content, task kind and pass, how many timed answers got the task right: the
    numbered answers of the warm and cold cells (`combined`), and the warm task asked on its
    own (`own question`). Cold and warm are never added together."""
    by: dict[tuple[int, str, str, str, str], AuditCount] = {}

    def add(r: Rung, content: str, kind: str, pass_: Pass, form: str, ok: bool) -> None:
        tasks = (r.contents.get(content) or Content()).tasks
        e = by.setdefault(
            (r.planned_tokens, content, kind, pass_, form),
            AuditCount(
                target=r.target,
                planned_tokens=r.planned_tokens,
                content=content,
                kind=kind,
                pass_=pass_,
                form=form,
                depths=next((t.depths for t in tasks if t.kind == kind), []),
            ),
        )
        e.asked += 1
        e.passed += int(ok)

    planned = {r.target: r for r in rungs}
    for row in rows:
        rung = planned.get(row.target)
        if rung is None or row.verdict == "error":
            continue
        for s in row.streams:
            if s.problem:
                continue
            for kind, check in s.tasks.items():
                add(rung, row.content, kind, row.pass_, "combined", check.passed)
    for rung in rungs:
        for content, info in rung.contents.items():
            for a in info.asked:
                if not a.problem:
                    add(rung, content, a.kind, "warm", "own question", a.check.passed)
    return Audits(by_kind=list(by.values()))
