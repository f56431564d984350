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

import copy
import json
import re

from qualify.context import battery, ladder
from qualify.context.corpus import Needle, Needles
from qualify.context.forms import (
    AuditForm,
    BatteryForm,
    ContentForm,
    DegenerateStreamForm,
    PassSpeedForm,
    RowForm,
    RungForm,
    StreamForm,
    record_form,
)
from qualify.context.record import Record
from qualify.context.tasks import Task, Tasks
from qualify.evidence.kept import AttemptView, NotKept
from qualify.httpclient.chat import ChatOutcome, from_response, from_stream
from qualify.httpclient.client import Exchange
from qualify.httpclient.timing import (
    RequestTiming,
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


def _kept(view: AttemptView, files: object, stream: bool) -> tuple[Exchange, ChatOutcome]:
    if not isinstance(files, list) or not files:
        raise NotKept("an answer names no kept exchange")
    ex = view.exchange(_PART.sub("", str(files[0])))
    return ex, from_stream(ex) if stream else from_response(ex)


def _needles(info: ContentForm) -> Needles:
    try:
        a, b = (
            Needle(int(n["depth"]), str(n["subject"]), str(n["value"])) for n in info["needles"]
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise NotKept(f"its needles are not recorded ({exc!r})") from None
    return Needles((a, b))


def _tasks(info: ContentForm) -> Tasks:
    try:
        return Tasks(
            tuple(
                Task(
                    kind=t["kind"],
                    lines=tuple((int(d), str(line)) for d, line in t["lines"]),
                    question=str(t["question"]),
                    expect=tuple(t["expect"]),
                    forbid=tuple(t.get("forbid") or ()),
                    count=t.get("count"),
                )
                for t in info.get("tasks") or []
            )
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise NotKept(f"its tasks are not recorded ({exc!r})") from None


def _held(ex: Exchange, needles: Needles, tasks: Tasks, where: str) -> None:
    """Every needle value and task line the rung recorded is in the prompt this request sent."""
    sent = json.dumps(ex.request_body, ensure_ascii=False)
    missing = [n.value for n in needles.pair if n.value not in sent]
    missing += [line for _, line in tasks.lines() if json.dumps(line)[1:-1] not in sent]
    if missing:
        raise NotKept(f"{where}: its prompt does not hold {missing[:3]}, which the rung records")


def _row(
    view: AttemptView,
    row: RowForm,
    contents: dict[str, ContentForm],
    timings: dict[int, list[RequestTiming]],
) -> RowForm:
    info = contents.get(row["content"]) or {}
    needles, tasks = _needles(info), _tasks(info)
    where = f"{row['target']} {row['pass']} {row['content']} c={row['concurrency']}"
    streams: list[StreamForm] = []
    counted: list[RequestTiming] = []
    for s in row.get("streams") or []:
        ex, o = _kept(view, s.get("files"), True)
        _held(ex, needles, tasks, where)
        t = timing(o)
        streams.append(ladder.stream_row(o, t, needles, s["files"], tasks))
        counted.append(t)
    out = copy.deepcopy(row)
    if row.get("gpu"):
        view.trust("each cell's per-card lowest free memory and mean power (the sampler's)")
    if row.get("acceptance"):
        view.trust("each cell's draft acceptance (the counter deltas around it)")
    if not streams:
        view.trust("the idle checks around each cell")
        return out
    out["streams"] = streams
    keep = _windowed(
        view, row, out, [t for t, s in zip(counted, streams, strict=True) if not s["problem"]]
    )
    ladder.summarize(out, streams)
    view.trust("each cell's wall span (its aggregate rate) and cached-token counter delta")
    idle_error = any(str(r).startswith("not counted:") for r in row.get("reasons") or [])
    if idle_error:
        view.trust("the idle checks around each cell")
        out["verdict"], out["reasons"] = row["verdict"], row["reasons"]
    else:
        ladder.verdict(out, streams, needles)
        if out["verdict"] != "error":
            timings.setdefault(int(row["concurrency"]), []).extend(keep)
    return ladder.warm_note(out)


def _windowed(
    view: AttemptView, row: RowForm, out: RowForm, keep: list[RequestTiming]
) -> list[RequestTiming]:
    """The cell's counted timings compared with the server's latency histograms over the cell,
    as the live ladder does (`with_server_window`), from the window the sealed row kept: the
    scrapes around the cell are not kept raw, so the window is taken as recorded and the
    client's side of the comparison is derived again from the exchanges."""
    kept = row.get("server_window")
    if kept is None:  # a record from before the per-cell window
        return keep
    window = kept.get("window")
    if window is not None:
        view.trust("each cell's server latency-histogram window (the scrapes around it)")
    server = ServerWindow.from_dict(window) if isinstance(window, dict) else None
    keep, out["server_window"] = with_server_window(keep, server)
    return keep


def _contents(view: AttemptView, contents: dict[str, ContentForm]) -> dict[str, ContentForm]:
    """Each content's warm-ups and tasks asked on their own, from their exchanges."""
    out = copy.deepcopy(contents)
    for kind, info in out.items():
        needles, tasks = _needles(info), _tasks(info)
        for w in info.get("warmups") or []:
            ex, o = _kept(view, w.get("files"), True)
            _held(ex, needles, tasks, f"{kind} warm-up {w.get('n')}")
            w.update(ladder.warmup_answer(o))
        by_kind = {t.kind: t for t in tasks.items}
        for a in info.get("asked") or []:
            asked = a.get("kind")
            task = by_kind.get(asked) if asked is not None else None
            if task is None:
                raise NotKept(f"{kind}: a task asked on its own is not one the rung records")
            ex, o = _kept(view, a.get("files"), True)
            _held(ex, needles, tasks, f"{kind} task {task.kind}")
            a.update(ladder.asked_answer(o, task))
    return out


def _battery(view: AttemptView, bat: BatteryForm | None) -> BatteryForm | None:
    if not bat:
        return bat
    from qualify.gates.files import default_gates_dir

    out = copy.deepcopy(bat)
    if out.get("tools") != battery.load_tools(default_gates_dir()):
        raise NotKept("the tool battery's tools are not the project's")
    cases = []
    for c in out.get("cases") or []:
        ex, o = _kept(view, c.get("files"), c.get("case") == "streaming")
        if (ex.request_body or {}).get("tools") != out["tools"]:
            raise NotKept(f"tool battery {c.get('case')}: its request did not carry the battery")
        cases.append(battery.record(c["case"], o, c["files"]))
    out["cases"] = cases
    return out


def _planned(view: AttemptView, targets: list[RungForm], rows: list[RowForm]) -> None:
    """The rungs are the signed candidate's targets, and every rung that ran holds one row per
    content, pass and concurrency the candidate names: no cell left out."""
    assert view.candidate is not None
    s = view.candidate.stages.context
    if [t.get("target") for t in targets] != list(s.targets):
        raise NotKept(f"its rungs are not the signed candidate's targets {s.targets}")
    have = sorted((r["target"], r["content"], r["pass"], r["concurrency"]) for r in rows)
    want = sorted(
        (t["target"], kind, pass_, c)
        for t in targets
        if t.get("same_as") is None and t.get("planned_tokens", 0) > 0 and not t.get("errors")
        for kind in s.content
        for pass_ in ("warm", "cold")
        for c in s.concurrency
    )
    if [w for w in want if w not in have]:
        missing = [w for w in want if w not in have]
        raise NotKept(f"cells the candidate names have no row: {missing[:3]}")


def rebuild(view: AttemptView) -> Record:
    """The context stage's record as its kept exchanges give it (see the module docstring)."""
    sealed = record_form(copy.deepcopy(view.sealed))
    if view.candidate is None:
        raise NotKept("no signed candidate copy in the run")
    if not any("acceptance" in r for r in sealed.get("rows") or []):
        view.earlier_form(["context-acceptance-depth"], "the record predates acceptance per cell")
    if "audits" not in sealed:
        view.earlier_form(_AUDITS, "the record predates the context audits (no audits field)")
    targets = copy.deepcopy(sealed.get("targets") or [])
    for t in targets:
        t["contents"] = _contents(view, t.get("contents") or {})
    by_target = {t["target"]: t for t in targets}
    timings: dict[int, list[RequestTiming]] = {}
    rows = []
    for row in sealed.get("rows") or []:
        target = row.get("target")
        rung = by_target.get(target) if target is not None else None
        if rung is None:
            raise NotKept(f"a row of target {row.get('target')} is of no rung")
        rows.append(_row(view, row, rung["contents"], timings))
    _planned(view, targets, rows)
    return Record.model_validate(
        {
            **sealed,
            "targets": targets,
            "rows": rows,
            "fidelity": fidelity_summary(view.candidate.identity.engine, timings),
            "degenerate": degenerate_streams(rows),
            "speed": speed_summary(rows),
            "audits": audit_summary(targets, rows),
            "battery": _battery(view, sealed.get("battery")),
        }
    )


def fidelity_summary(engine: str, timings: dict[int, list[RequestTiming]]) -> dict[str, object]:
    """`qualify.httpclient.timing.fidelity` over every counted stream, and per concurrency (the
    TTFT bound depends on it: queued requests wait before the server's prompt time starts)."""
    every = [t for ts in timings.values() for t in ts]
    return {
        **fidelity(every),
        "engine": engine,
        "by_concurrency": {str(c): fidelity(ts) for c, ts in sorted(timings.items())},
    }


def degenerate_streams(rows: list[RowForm]) -> list[DegenerateStreamForm]:
    """Every stream whose answer is degenerate, with where it ran: kept, and never a speed."""
    return [
        {
            "target": row["target"],
            "planned_tokens": row["planned_tokens"],
            "pass": row["pass"],
            "content": row["content"],
            "concurrency": row["concurrency"],
            "stream": i + 1,
            "reason": s["degenerate"],
            "answer": s["answer"][:160],
            "decode_tok_s": s["decode_tok_s"],
            "files": s["files"],
        }
        for row in rows
        for i, s in enumerate(row.get("streams", []))
        if s["degenerate"] and not s["problem"]
    ]


def speed_summary(rows: list[RowForm]) -> dict[str, PassSpeedForm]:
    """Per pass, decode tok/s over the counted streams whose answers are not degenerate, by rung
    (planned tokens) and over all rungs, with how many degenerate streams were left out."""
    out: dict[str, PassSpeedForm] = {}
    for pass_ in ("warm", "cold"):
        counted = [
            (row["planned_tokens"], s)
            for row in rows
            if row["pass"] == pass_ and row["verdict"] != "error"
            for s in row.get("streams", [])
        ]
        speed = [(p, s["decode_tok_s"]) for p, s in counted if not s["degenerate"]]
        rates = [float(v) for _, v in speed if isinstance(v, int | float)]
        by_rung: dict[str, list[float]] = {}
        for p, v in speed:
            if isinstance(v, int | float):
                by_rung.setdefault(str(p), []).append(float(v))
        out[pass_] = {
            "streams": len(counted),
            "degenerate_left_out": len(counted) - len(speed),
            "decode_tok_s_median": median(rates),
            "decode_tok_s_p5": percentile(rates, 5),
            "decode_tok_s_p95": percentile(rates, 95),
            "decode_tok_s_median_by_rung": {p: median(v) for p, v in by_rung.items()},
        }
    return out


def audit_summary(rungs: list[RungForm], rows: list[RowForm]) -> dict[str, list[AuditForm]]:
    """Per rung, content, task kind and pass, how many timed answers got the task right: the
    numbered answers of the warm and cold cells (`combined`), and the warm task asked on its
    own (`own question`). Cold and warm are never added together."""
    by: dict[tuple[int, str, str, str, str], AuditForm] = {}

    def add(r: RungForm, content: str, kind: str, pass_: str, form: str, ok: bool) -> None:
        key = (r["planned_tokens"], content, kind, pass_, form)
        e = by.setdefault(
            key,
            {
                "target": r["target"],
                "planned_tokens": r["planned_tokens"],
                "content": content,
                "kind": kind,
                "pass": pass_,
                "form": form,
                "depths": next(
                    (
                        t["depths"]
                        for t in (r["contents"].get(content) or {}).get("tasks", [])
                        if t["kind"] == kind
                    ),
                    [],
                ),
                "asked": 0,
                "passed": 0,
            },
        )
        e["asked"] += 1
        e["passed"] += int(ok)

    planned = {r["target"]: r for r in rungs}
    for row in rows:
        r = planned.get(row["target"])
        if r is None or row["verdict"] == "error":
            continue
        for s in row.get("streams", []):
            if s["problem"]:
                continue
            for kind, check in (s.get("tasks") or {}).items():
                add(r, row["content"], kind, row["pass"], "combined", bool(check["passed"]))
    for r in rungs:
        for content, info in r["contents"].items():
            for a in info.get("asked") or []:
                if not a["problem"]:
                    add(r, content, a["kind"], "warm", "own question", bool(a["check"]["passed"]))
    return {"by_kind": list(by.values())}
