"""The context ladder's judged data rebuilt from the exchanges an attempt kept (`verify`).

Every timed stream, warm-up, task asked on its own and tool-battery case is read back from its
kept exchange and measured and checked again as the stage did (`ladder._stream_row`,
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
from types import SimpleNamespace
from typing import Any

from qualify.context import battery, ladder
from qualify.context.corpus import Needle, Needles
from qualify.context.record import Record
from qualify.context.stage import (
    _problem,
    audit_summary,
    degenerate_streams,
    fidelity_summary,
    speed_summary,
    warm_note,
)
from qualify.context.tasks import Task, Tasks
from qualify.evidence.kept import AttemptView, NotKept
from qualify.httpclient.chat import ChatOutcome, from_response, from_stream
from qualify.httpclient.client import Exchange
from qualify.httpclient.timing import RequestTiming, timing, with_server_window
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


def _needles(info: dict[str, Any]) -> Needles:
    try:
        a, b = (
            Needle(int(n["depth"]), str(n["subject"]), str(n["value"])) for n in info["needles"]
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise NotKept(f"its needles are not recorded ({exc!r})") from None
    return Needles((a, b))


def _tasks(info: dict[str, Any]) -> Tasks:
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
    view: AttemptView, row: dict[str, Any], contents: dict[str, Any], timings: dict[int, Any]
) -> dict[str, Any]:
    info = contents.get(row["content"]) or {}
    needles, tasks = _needles(info), _tasks(info)
    where = f"{row['target']} {row['pass']} {row['content']} c={row['concurrency']}"
    streams, counted = [], []
    for s in row.get("streams") or []:
        ex, o = _kept(view, s.get("files"), True)
        _held(ex, needles, tasks, where)
        t = timing(o)
        streams.append(ladder._stream_row(o, t, needles, s["files"], tasks))
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
    aggregate = row.get("aggregate_output_tok_s")
    ladder._summarize(out, streams, 1.0)
    out["aggregate_output_tok_s"] = aggregate
    view.trust("each cell's wall span (its aggregate rate) and cached-token counter delta")
    idle_error = any(str(r).startswith("not counted:") for r in row.get("reasons") or [])
    if idle_error:
        view.trust("the idle checks around each cell")
        out["verdict"], out["reasons"] = row["verdict"], row["reasons"]
    else:
        out["_needles"] = needles
        ladder._verdict(out, streams)
        del out["_needles"]
        if out["verdict"] != "error":
            timings.setdefault(int(row["concurrency"]), []).extend(keep)
    return warm_note(out)


def _windowed(
    view: AttemptView, row: dict[str, Any], out: dict[str, Any], keep: list[RequestTiming]
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
    server = None if window is None else ServerWindow.from_dict(window)
    keep, out["server_window"] = with_server_window(keep, server)
    return keep


def _contents(view: AttemptView, contents: dict[str, Any]) -> dict[str, Any]:
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
            task = by_kind.get(a.get("kind"))
            if task is None:
                raise NotKept(f"{kind}: a task asked on its own is not one the rung records")
            ex, o = _kept(view, a.get("files"), True)
            _held(ex, needles, tasks, f"{kind} task {task.kind}")
            a.update(ladder.asked_answer(o, task))
    return out


def _battery(view: AttemptView, bat: dict[str, Any] | None) -> dict[str, Any] | None:
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
        cases.append(battery.record(c["case"], o, c["files"], _problem(o)))
    out["cases"] = cases
    return out


def _planned(view: AttemptView, targets: list[dict[str, Any]], rows: list[dict[str, Any]]) -> None:
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
    sealed = copy.deepcopy(view.sealed)
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
        rung = by_target.get(row.get("target"))
        if rung is None:
            raise NotKept(f"a row of target {row.get('target')} is of no rung")
        rows.append(_row(view, row, rung["contents"], timings))
    _planned(view, targets, rows)
    rungs = [
        SimpleNamespace(target=t["target"], planned=t["planned_tokens"], contents=t["contents"])
        for t in targets
    ]
    return Record.model_validate(
        {
            **sealed,
            "targets": targets,
            "rows": rows,
            "fidelity": fidelity_summary(view.candidate.identity.engine, timings),
            "degenerate": degenerate_streams(rows),
            "speed": speed_summary(rows),
            "audits": audit_summary(rungs, rows),  # type: ignore[arg-type]
            "battery": _battery(view, sealed.get("battery")),
        }
    )
