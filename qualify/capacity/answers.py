"""Correctness under load: every answer of every load cell judged by the checks that apply
(`broken`: degenerate, garble for prose and lists, JSON for the JSON kind, tool calls nobody
offered, truncation), since a fast server that answers wrongly under load is not fast. A cut JSON
answer must still be a valid JSON *prefix*, so a broken answer is caught even when the budget cut
it; a broken answer never meets the SLOs, and `capacity-answers` fails its cell.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from qualify.capacity.loads import Load, LoadStream
from qualify.capacity.record import (
    AnswerCell,
    Answers,
    BrokenAnswer,
    DegenerateAnswer,
    KindRow,
    MatrixRow,
    RunStream,
)
from qualify.httpclient.chat import ToolCall
from qualify.httpclient.degenerate import degenerate
from qualify.preflight.checks.text import garble
from qualify.preflight.code import check_code

_FENCE = re.compile(r"^\s*```[a-zA-Z0-9_-]*\s*\n?|\n?```\s*$")
_CLOSE = {"[": "]", "{": "}"}
_PARTIAL = re.compile(r"^\s*[A-Za-z0-9.+-]*$")


def _unfence(text: str) -> str:
    return _FENCE.sub("", text.strip()).strip()


def _open_brackets(text: str) -> tuple[list[str], bool] | None:
    """The brackets still open at the end of `text` and whether it ends inside a string; None
    when a closing bracket does not match."""
    stack: list[str] = []
    in_str = esc = False
    for ch in text:
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in _CLOSE:
            stack.append(ch)
        elif ch in "]}" and (not stack or _CLOSE[stack.pop()] != ch):
            return None
    return stack, in_str


def json_prefix_ok(text: str) -> bool:
    """Whether some continuation makes `text` valid JSON: it is closed with the brackets still
    open after, at most, finishing a string, a key or a partial literal."""
    text = _unfence(text) if text.lstrip().startswith("```") else text.strip()
    if not text:
        return True
    if text[0] not in "[{":
        try:
            json.loads(text)
            return True
        except ValueError:
            return False
    cuts = [len(text)]
    last = max(text.rfind(c) for c in ",[{:")
    if last >= 0 and _PARTIAL.match(text[last + 1 :]):
        cuts.append(last + 1)  # drop a partial literal or number (`tru`, `12.`)
    for cut in cuts:
        head = text[:cut]
        for mid in ("", '"', "null", '":null', ":null", "0", '"]', '"}'):
            trial = head + mid
            state = _open_brackets(trial)
            if state is None:
                continue
            stack, in_str = state
            if in_str:
                continue
            body = trial.rstrip()
            if body.endswith(","):
                body = body[:-1]
            try:
                json.loads(body + "".join(_CLOSE[b] for b in reversed(stack)))
                return True
            except ValueError:
                continue
    return False


def json_problem(text: str, finished: bool) -> str | None:
    """Why a JSON-kind answer is not JSON (a cut answer: not even a JSON prefix)."""
    body = _unfence(text)
    if finished:
        try:
            json.loads(body)
            return None
        except json.JSONDecodeError as exc:
            return f"not JSON ({exc.msg} at {exc.pos}): {body[:60]!r}"
    if json_prefix_ok(body):
        return None
    return f"cut at the budget and not a JSON prefix: {body[:60]!r}"


def broken(
    kind: str,
    content: str,
    finish_reason: str | None,
    completion_tokens: int | None,
    max_tokens: int,
    tool_calls: Sequence[ToolCall] | None = None,
) -> list[str]:
    """Every problem of one answered stream; empty when the answer is right. The load's prompts
    offer no tool, so any tool call is one."""
    out = []
    calls = tool_calls or []
    if not content.strip() and not calls:
        out.append("empty answer")
    if finish_reason is None:
        out.append("truncated: no finish reason")
    elif finish_reason == "length" and (completion_tokens or 0) < max_tokens:
        out.append(
            f"truncated: finish_reason length after {completion_tokens} of {max_tokens} tokens"
        )
    if why := degenerate(content):
        out.append(f"degenerate: {why}")
    if kind in ("prose", "list"):
        # runs of one character are the degenerate check's (a Markdown rule is not garble)
        out += [f"garble: {g}" for g in garble(content, run_limit=1 << 30)]
    finished = finish_reason == "stop"
    if kind == "json" and content.strip() and (why := json_problem(content, finished)):
        out.append(f"json: {why}")
    out += [f"tool call {c.name!r} though no tool was offered" for c in calls]
    return out


def degenerate_answers(rows: Sequence[MatrixRow | KindRow]) -> list[DegenerateAnswer]:
    """Every degenerate answer of the matrix's and the per-kind decode's rows, where and why."""
    return [
        DegenerateAnswer(
            lane=getattr(row, "lane", "candidate"),
            where=row.cell,
            run=run.run,
            stream=i + 1,
            reason=st.degenerate,
            files=st.files,
        )
        for row in rows
        for run in row.run_records
        for i, st in enumerate(run.streams)
        if st.degenerate
    ]


def judged_cells(matrix: Sequence[MatrixRow], kinds: Sequence[KindRow], load: Load) -> Answers:
    """Every answer judged: per load cell, how many were judged and which broke, and why."""
    cells: list[AnswerCell] = []

    def add(where: str, lane: str, kind: str, streams: Sequence[RunStream | LoadStream]) -> None:
        judged = [st for st in streams if not (st.failed or st.cut)]
        judged = [st for st in judged if not getattr(st, "unfinished", None)]
        bad = [
            BrokenAnswer(stream=i + 1, problems=st.broken, files=st.files)
            for i, st in enumerate(streams)
            if st.broken
        ]
        cells.append(AnswerCell(where=where, lane=lane, kind=kind, judged=len(judged), broken=bad))

    for row in matrix:
        add(row.cell, row.lane, "prose", [st for r in row.run_records for st in r.streams])
    for k in kinds:
        add(k.cell, "candidate", k.kind, [st for r in k.run_records for st in r.streams])
    for c in load.cells:
        add(c.cell, load.lane, load.kind, c.streams)
    for c in load.incumbent.cells if load.incumbent else []:
        add(c.cell, "incumbent", load.kind, c.streams)
    if load.soak:
        add("soak", load.lane, load.kind, load.soak.streams)
    judged, broken = sum(c.judged for c in cells), sum(len(c.broken) for c in cells)
    return Answers(cells=cells, judged=judged, broken=broken)


def answer_code() -> str:
    """The digest of the code that judges answers under load (`check_code("capacity")`): each
    capacity record keeps it, so `verify` holds a run of this code to every judgment."""
    return check_code("capacity")
