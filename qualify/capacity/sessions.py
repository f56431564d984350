"""Multi-turn agent sessions under load: `count` sessions at once, each three turns on one
growing conversation, its task drawn from its number alone (`script`): a `read_metric` tool call
(judged by the server's parser; a session whose model made none goes on with the call it should
have made, `scripted`, so the later turns still grow the prefix), the tool's result read back, and
a follow-up that must keep the value (`judge_turn`). Each turn's exchange is kept
(`load-session-t<turn>-s<session>`) and its record derived from it (`turn_record`, which `verify`
runs again); `session_figures` gives per turn the median TTFT, prompt and cached prompt tokens (the
prefix cache's hits), and the goodput of the turns under the SLOs (a broken turn misses them).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from qualify.capacity.loads import Sessions, SessionTurn
from qualify.capacity.runs import stream_record
from qualify.capacity.slo import Slo, goodput
from qualify.evidence.kept import AttemptView, NotKept
from qualify.httpclient.chat import ChatOutcome, from_stream
from qualify.httpclient.client import Exchange
from qualify.httpclient.load import CHAT
from qualify.httpclient.timing import median
from qualify.serving.sender import Sender

TURNS = 3
METRICS = ("p99_latency_ms", "queue_depth", "error_count")
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_metric",
            "description": "Read the current value of one metric of one serving host.",
            "parameters": {
                "type": "object",
                "properties": {
                    "host": {"type": "string", "description": "the host name"},
                    "metric": {"type": "string", "enum": list(METRICS)},
                },
                "required": ["host", "metric"],
            },
        },
    }
]


@dataclass(frozen=True)
class Script:
    """One session's task: what it asks, and the value its tool returns."""

    host: str
    metric: str
    value: int

    def ask(self, turn: int) -> str:
        if turn == 1:
            return f"Use the read_metric tool to read the {self.metric} of the host {self.host}."
        return (
            f"Is the {self.metric} of {self.host} above 300? Answer yes or no, and give the "
            "value you read."
        )

    def call(self) -> dict[str, object]:
        args = json.dumps({"host": self.host, "metric": self.metric})
        fn = {"name": "read_metric", "arguments": args}
        return {"id": "call-1", "type": "function", "function": fn}

    def result(self) -> str:
        return json.dumps({"host": self.host, "metric": self.metric, "value": self.value})


def script(session: int) -> Script:
    """Session `session`'s task (from 0), from its number alone."""
    return Script(f"gpu-node-{session + 3}", METRICS[session % 3], 417 + 29 * session)


def judge_turn(turn: int, s: Script, o: ChatOutcome) -> list[str]:
    """What is wrong with one turn's answer (empty: right)."""
    if turn == 1:
        calls = [c for c in o.tool_calls if c.name == "read_metric"]
        if not calls:
            return [f"no read_metric call (answer {o.content[:80]!r})"]
        args, err = calls[0].parsed_arguments()
        if err is not None or not isinstance(args, dict):
            return [f"read_metric arguments are not a JSON object: {calls[0].arguments[:80]!r}"]
        if args.get("host") != s.host or args.get("metric") != s.metric:
            return [f"read_metric called for {args}, asked {s.host} {s.metric}"]
        return []
    if str(s.value) not in o.content:
        what = "the tool result is ignored" if turn == 2 else "the follow-up lost the value"
        return [f"{what}: the answer does not give {s.value} ({o.content[:80]!r})"]
    return []


TURN_KEYS = tuple(SessionTurn.model_fields)  # what the record keeps of a turn


def turn_record(ex: Exchange, files: list[str], session: int, turn: int) -> dict[str, object]:
    """One turn's figures and judgment from its exchange (the stage's and `verify`'s): a
    stream's, with its session, turn and whether the session went on with the call the model
    should have made (`scripted`)."""
    rec: dict[str, object] = {**stream_record(ex, files), "session": session, "turn": turn}
    o = from_stream(ex)
    problems = [] if rec["failed"] or rec["cut"] else judge_turn(turn, script(session), o)
    rec |= {"broken": problems, "scripted": turn == 1 and bool(problems)}
    return {k: rec[k] for k in TURN_KEYS}


def _by_turn(turns: Sequence[Mapping[str, object]], key: str) -> list[float | None]:
    return [
        median(
            [float(v) for t in turns if t["turn"] == n and isinstance(v := t.get(key), int | float)]
        )
        for n in range(1, TURNS + 1)
    ]


def session_figures(
    turns: list[dict[str, object]], slo: Slo, window_s: float | None
) -> dict[str, object]:
    """The sessions' figures from their turns: per turn the median TTFT, prompt and cached
    tokens; turns judged and broken; goodput of the turns under the SLOs."""
    return {
        "turns": turns,
        "ttft_p50_s_by_turn": _by_turn(turns, "ttft_s"),
        "prompt_tokens_by_turn": _by_turn(turns, "prompt_tokens"),
        "cached_tokens_by_turn": _by_turn(turns, "cached_tokens"),
        "judged": sum(1 for t in turns if not t.get("failed") and not t.get("cut")),
        "broken": sum(1 for t in turns if t.get("broken")),
        **goodput(turns, slo, window_s).model_dump(),
    }


async def _session(sender: Sender, k: int, max_tokens: int) -> list[dict[str, object]]:
    s = script(k)
    msgs: list[dict[str, Any]] = [{"role": "user", "content": s.ask(1)}]  # chat JSON, tool calls
    out = []
    for turn in range(1, TURNS + 1):
        # every turn offers the tool, as an agent loop does: the prefix stays the same
        body = {**sender.request(msgs), "max_tokens": max_tokens, "tools": TOOLS}
        ex = await sender.client.stream(CHAT, body, sender.timeout_s)
        files = sender.keep(f"load-session-t{turn}-s{k + 1}", ex)
        out.append(turn_record(ex, files, k, turn))
        if turn == 1:
            call = s.call()
            msgs.append({"role": "assistant", "content": "", "tool_calls": [call]})
            msgs.append({"role": "tool", "tool_call_id": call["id"], "content": s.result()})
        else:
            msgs.append({"role": "assistant", "content": from_stream(ex).content})
            msgs.append({"role": "user", "content": s.ask(3)})
    return out


async def run_sessions(sender: Sender, count: int, max_tokens: int) -> dict[str, object]:
    """`count` sessions at once; their record."""
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    done = await asyncio.gather(*(_session(sender, k, max_tokens) for k in range(count)))
    window = loop.time() - t0
    turns = [t for session in done for t in session]
    return {"count": count, "window_s": window, "turns": turns}  # figures: `sessions_again`


def sessions_again(view: AttemptView, sealed: Sessions, slo: Slo) -> dict[str, object]:
    """The sessions measured again (`verify`): each turn from its kept exchange, judged by
    `turn_record`, the figures by `session_figures`; the window as recorded."""
    again = []
    for t in sealed.turns:
        want = f"load-session-t{t.turn}-s{t.session + 1}.json"
        name = re.sub(r"\.part\d{3}$", "", t.files[0]) if t.files else ""
        if not re.fullmatch(r"\d{4}-" + re.escape(want), name):
            raise NotKept(f"session turn {want}: its exchange {name or 'none'} is not kept")
        again.append(turn_record(view.exchange(name), t.files, t.session, t.turn))
    if len(again) != TURNS * sealed.count:
        raise NotKept(f"{len(again)} session turns kept, {sealed.count} sessions planned")
    return sealed.model_dump() | session_figures(again, slo, sealed.window_s)
