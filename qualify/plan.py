"""`qualify run --plan`: every request the run would send, stage by stage, none of them sent.

The stages' own code runs against a client whose transport records each request and answers it
with a "dry run" connection error, so the plan is what they build, not a second description of
it. A stage whose next requests depend on the server's answers (identity reads `/v1/models`
before the engine's info paths; context sizes prompts with `/tokenize`) stops where a real run
would wait, and the plan says so with the stage's own reason. No server is launched (its command
is printed), no API key is needed, and the stages' scratch attempts live in a temporary
directory that is removed.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

import httpx

from qualify.candidate import LoadedCandidate
from qualify.errors import RunAborted
from qualify.evidence.store import EvidenceStore, RunDir
from qualify.httpclient.client import Client
from qualify.progress import Progress
from qualify.records import Verdict
from qualify.registry import run_order, specs
from qualify.serving.command import shell_line
from qualify.serving.lanes import Lanes
from qualify.serving.process import ServerProcess
from qualify.stage import STAGES, StageContext

NOT_SENT = "dry run: not sent"


@dataclass
class Planned:
    lane: str
    method: str
    path: str
    body: object  # the request's JSON


@dataclass
class Recorder(httpx.AsyncBaseTransport):
    """Keeps each request and answers none."""

    lane: str
    seen: list[Planned] = field(default_factory=list)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        raw = request.content
        body = json.loads(raw) if raw else None
        self.seen.append(Planned(self.lane, request.method, request.url.path, body))
        raise httpx.ConnectError(NOT_SENT, request=request)


class PlanLanes(Lanes):
    """Lanes that never launch: each lane's client records instead of sending."""

    def __init__(self, lanes: dict[str, LoadedCandidate], seen: list[Planned]) -> None:
        self.loaded = lanes
        self.current = None
        self.process = None
        self._client = None
        self.launches = []
        self.seen = seen

    async def use(self, lane: str) -> Client:
        if lane not in self.loaded:
            raise RunAborted(f"no {lane} lane in this run")
        srv = self.loaded[lane].candidate.server
        rec = Recorder(lane, self.seen)
        self.current = lane
        return Client(srv.base_url, None, timeout_s=srv.request_timeout_s, transport=rec)

    async def stop(self) -> None:
        self.current = None


def summary(body: object) -> str:
    """What a request body asks: model, budget, messages and their lengths, tools, input."""
    if not isinstance(body, dict):
        return "" if body is None else f"body {str(body)[:60]!r}"
    named = ("model", "max_tokens", "max_output_tokens", "stream", "reasoning_effort")
    parts = [f"{key}={body[key]}" for key in named if key in body]
    msgs = body.get("messages")
    if isinstance(msgs, list):
        lens = ", ".join(f"{m.get('role')} {len(str(m.get('content') or ''))}" for m in msgs)
        parts.append(f"messages={len(msgs)} [{lens} chars]")
    parts += [f"{k}={len(str(body[k]))} chars" for k in ("input", "prompt") if k in body]
    tools = body.get("tools")
    if isinstance(tools, list) and tools:
        names = [str((t.get("function") or t).get("name")) for t in tools if isinstance(t, dict)]
        parts.append(f"tools=[{', '.join(names)}]")
    if "tool_choice" in body:
        parts.append(f"tool_choice={body['tool_choice']}")
    other = sorted(set(body) - set(named) - {"messages", "input", "prompt", "tools", "tool_choice"})
    if other:
        parts.append(f"also {', '.join(other)}")
    return " ".join(parts)


def _launch_line(loaded: LoadedCandidate, run: RunDir, lane: str) -> str:
    srv = loaded.candidate.server
    if srv.attach:
        return f"attach to {srv.base_url}"
    proc = ServerProcess(loaded, run.new_attempt(f"plan-server-{lane}"), lane)
    return f"launch: {shell_line(proc.command())}  (health: GET {srv.health_path})"


async def _stage(name: str, ctx: StageContext) -> str | None:
    """Run one stage against the recorder; the reason it gave when it stopped short."""
    try:
        result = await STAGES[name](ctx)
    except RunAborted as exc:
        return str(exc)
    if result.verdict in (Verdict.ERROR, Verdict.INCONCLUSIVE):
        return next((r for r in result.reasons if NOT_SENT in r), None)
    return None


def print_plan(
    loaded: LoadedCandidate, control: LoadedCandidate | None, stages: list[str], out: TextIO
) -> int:
    """Print the plan; returns how many requests were listed."""
    from qualify.evidence import logs

    logs.configure(None)  # the stages' log events describe requests that were never sent
    lanes = {"candidate": loaded, **({"control": control} if control else {})}
    seen: list[Planned] = []
    with tempfile.TemporaryDirectory(prefix="qualify-plan-") as tmp:
        run = EvidenceStore(Path(tmp)).new_run(loaded.candidate.name)
        print(f"plan for {loaded.candidate.name} ({loaded.path}): nothing is sent", file=out)
        for lane, lc in lanes.items():
            print(f"  {lane}: {_launch_line(lc, run, lane)}", file=out)
        plan_lanes = PlanLanes(lanes, seen)
        for name in run_order(stages):
            if name not in STAGES:
                print(f"\n[{name}] not in this build of qualify", file=out)
                continue
            attempt = run.new_attempt(name)
            ctx = StageContext(name, loaded, run, attempt, plan_lanes, Progress(quiet=True))
            ctx.from_kept = False
            before = len(seen)
            why = asyncio.run(_stage(name, ctx))
            mine = seen[before:]
            print(f"\n[{name}] {len(mine)} request(s)", file=out)
            for i, r in enumerate(mine, 1):
                lane = "" if r.lane == "candidate" else f" ({r.lane})"
                print(f"  {i:3d}. {r.method} {r.path}{lane} {summary(r.body)}".rstrip(), file=out)
            note = specs()[name].loaded.plan_note
            if note is not None:
                print(f"  {note(loaded)}", file=out)
            elif why and mine:
                print(
                    "  ... any further request depends on the server's answers (none came, "
                    f"so it is not listed); the stage said: {why}",
                    file=out,
                )
    print(f"\n{len(seen)} request(s) listed; none sent, no evidence written", file=out)
    return len(seen)
