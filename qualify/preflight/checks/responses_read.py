"""Reading Responses API answers: output items, message text, and the streamed event order."""

from __future__ import annotations

import json
from itertools import pairwise
from typing import Any, Literal

from qualify.httpclient.client import SSEEvent

TERMINAL = {"response.completed", "response.incomplete", "response.failed", "error"}


def output_items(body: object, kind: str) -> list[dict[str, Any]]:  # raw server JSON
    items = body.get("output") if isinstance(body, dict) else None
    return [i for i in items or [] if isinstance(i, dict) and i.get("type") == kind]


def text_of(body: object, kind: Literal["message", "reasoning"]) -> str:  # raw server JSON
    """The text of every `message` output item (its `output_text` parts: the visible answer) or
    every `reasoning` one (its `reasoning_text` parts), joined."""
    part = "output_text" if kind == "message" else "reasoning_text"
    return "".join(
        str(c.get("text") or "")
        for item in output_items(body, kind)
        for c in item.get("content") or []
        if isinstance(c, dict) and c.get("type") == part
    )


def incomplete_reason(body: object) -> str | None:  # raw server JSON
    """`incomplete_details.reason` of a response whose `status` is `incomplete` (vLLM ends a
    cut answer so: `max_output_tokens`), else None."""
    if not isinstance(body, dict) or body.get("status") != "incomplete":
        return None
    details = body.get("incomplete_details")
    reason = details.get("reason") if isinstance(details, dict) else None
    return str(reason or "unknown")


def terminal(
    parsed: list[tuple[str, dict[str, object]]],  # raw server JSON
) -> tuple[str | None, str | None]:
    """The last event's type and, when its response is `incomplete`, the reason. vLLM 0.26
    (recorded) ends a cut stream with `response.completed` whose response has status
    `incomplete` and `incomplete_details.reason` `max_output_tokens`; the Responses API
    documents a `response.incomplete` event for it: both are read."""
    if not parsed:
        return None, None
    kind, data = parsed[-1]
    return kind, incomplete_reason(data.get("response"))


def parse_events(
    events: list[SSEEvent],
) -> tuple[list[tuple[str, dict[str, object]]], list[str]]:  # raw server JSON
    """(type, payload) per event, the type from the `event:` line or the payload; and the bad."""
    out, bad = [], []
    for ev in events:
        try:
            data = json.loads(ev.data)
        except ValueError:
            bad.append(ev.data[:120])
            continue
        if not isinstance(data, dict):
            bad.append(ev.data[:120])
            continue
        out.append((str(data.get("type") or ev.event), data))
    return out, bad


def _index(types: list[str], name: str, last: bool = False) -> int | None:
    hits = [i for i, t in enumerate(types) if t == name]
    return (hits[-1] if last else hits[0]) if hits else None


def order_problems(parsed: list[tuple[str, dict[str, object]]]) -> list[str]:  # raw server JSON
    """Why the events are not in the documented order (empty when they are)."""
    types = [t for t, _ in parsed]
    if not types:
        return ["no events"]
    problems = []
    if types[0] != "response.created":
        problems.append(f"the first event is {types[0]!r}, expected 'response.created'")
    last, why = terminal(parsed)
    if last in ("response.incomplete", "response.completed") and why == "max_output_tokens":
        pass  # a cut answer ends so: the answer is judged from what it holds
    elif last == "response.completed" and why is not None:
        problems.append(f"the stream ends incomplete: incomplete_details.reason {why!r}")
    elif types[-1] != "response.completed":
        problems.append(
            f"the last event is {types[-1]!r}, expected 'response.completed' (or "
            "'response.incomplete' with incomplete_details.reason max_output_tokens)"
        )
    early = [t for t in types[:-1] if t in TERMINAL]
    if early:
        problems.append(f"{early[0]!r} arrived before the end of the stream")
    added = _index(types, "response.output_item.added")
    first_delta = _index(types, "response.output_text.delta")
    last_delta = _index(types, "response.output_text.delta", last=True)
    done = _index(types, "response.output_item.done", last=True)
    if first_delta is None and "response.reasoning_text.delta" in types:
        pass  # reasoning only: named by the caller, not an order problem
    elif first_delta is None:
        problems.append("no response.output_text.delta event")
    elif added is None or added > first_delta:
        problems.append("text deltas arrived before response.output_item.added")
    elif last_delta is not None and (done is None or done < last_delta):
        problems.append("text deltas arrived after response.output_item.done (or it never came)")
    seq = [n for _, d in parsed if isinstance(n := d.get("sequence_number"), int)]
    if seq and any(b <= a for a, b in pairwise(seq)):
        problems.append("sequence_number does not increase from event to event")
    return problems


def streamed_text(
    parsed: list[tuple[str, dict[str, object]]],  # raw server JSON
) -> tuple[str, str | None]:
    """The text joined from deltas, and the text `output_text.done` reported (if any)."""
    joined = "".join(
        str(d.get("delta") or "") for t, d in parsed if t == "response.output_text.delta"
    )
    done = [d.get("text") for t, d in parsed if t == "response.output_text.done"]
    return joined, (str(done[-1]) if done and done[-1] is not None else None)
