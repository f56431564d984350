"""Identity: every pin against what the server says about itself and how qualify launched it.

The stage only gathers: the server's own reports (`GET /v1/models` and the engine's info
paths), the launch command qualify ran (the server attempt's `launch.json`) and, for a
container, what the runtime says of the image. The engine's adapter turns them into pins seen
(`qualify.serving.identity`) and the stage writes them as its record
(`qualify.identity.record`); the gates in `gates/identity/` judge it (`qualify.identity.judges`).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable

from qualify.candidate import Identity
from qualify.httpclient.client import Client, Exchange
from qualify.identity.record import Fingerprint, LaunchShown, Record
from qualify.records import StageResult
from qualify.serving.command import runtime_output
from qualify.serving.engine import EngineAdapter, adapter
from qualify.serving.engine.vllm import CHAT_PROBE, fingerprint
from qualify.serving.identity import PINS, ImageReport, Launch
from qualify.serving.lanes import Launched
from qualify.stage import StageContext, finish


def _label(path: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", path.strip("/")).strip("-") or "root"


# Keeps one exchange under a label (`StageContext.keep`, or nothing at all).
Keep = Callable[[str, Exchange], object]


def answer(ex: Exchange, text: bool = False) -> object:
    """What the stage reads of an exchange: its body (or text), None unless it succeeded."""
    if not ex.ok:
        return None
    return ex.text if text else ex.body


async def engine_reports(
    client: Client, engine: EngineAdapter, model: str, keep: Keep
) -> dict[str, object]:
    """What the engine reports besides `GET /v1/models`: each of its info paths (Prometheus
    pages as text) and, where every answer carries something, one 1-token completion of
    `model`. The identity stage and `qualify init` both read a server through it."""
    bodies: dict[str, object] = {}
    for path in engine.paths:
        ex = await client.get(path)
        keep(_label(path), ex)
        bodies[path] = answer(ex, path in engine.text_paths)
    if engine.probe_chat:  # one 1-token completion (vLLM's `system_fingerprint`)
        body = {"model": model, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1}
        ex = await client.post("/v1/chat/completions", body)
        keep("probe-chat", ex)
        bodies[CHAT_PROBE] = answer(ex)
    return bodies


def inspect_image(runtime: str, image: str, container_id: str | None) -> ImageReport:
    """What the container runtime reports of the image the server runs from: its id and its
    repository digests (`docker inspect` of the container, then `docker image inspect`)."""
    out: ImageReport = {"image": image}
    if not container_id:
        return {**out, "error": "the runtime printed no container id"}
    image_id, err = runtime_output([runtime, "inspect", "--format", "{{.Image}}", container_id])
    if image_id is None:
        return {**out, "error": err}
    digests, err = runtime_output(
        [runtime, "image", "inspect", "--format", "{{json .RepoDigests}}", image_id]
    )
    if digests is None:
        return {**out, "id": image_id, "error": err}
    try:
        repo_digests = [str(d) for d in json.loads(digests) or []]
    except ValueError:
        return {**out, "id": image_id, "error": f"unreadable RepoDigests: {digests[:200]!r}"}
    return {**out, "id": image_id, "repo_digests": repo_digests}


async def launched(ctx: StageContext) -> Launch | None:
    """How qualify started the candidate's server; None when it attached to a running one."""
    srv = ctx.candidate.server
    proc = ctx.lanes.process
    if srv.attach or proc is None:
        return None
    try:  # the command as the launch recorded it in its evidence, else as it would be built
        recorded = json.loads((proc.attempt.path / "launch.json").read_text())["command"]
        args = [str(a) for a in recorded]
    except (OSError, ValueError, KeyError, TypeError):
        args = proc.command()
    if srv.container is None:
        return Launch("local", args, dict(srv.launch.env) if srv.launch else {})
    c = srv.container
    image = await asyncio.to_thread(inspect_image, c.runtime, c.image, proc.container_id)
    return Launch("container", args, dict(c.env), image)


def gather(
    pins: Identity,
    bodies: dict[str, object],
    launch: Launch | None,
    unreachable: str | None = None,
    launches: list[Launched] | None = None,
) -> Record:
    """The stage's record: each pin as pinned, as seen (value and source), or why unseen."""
    seen, why = adapter(pins.engine).observe(bodies, launch)
    pinned = pins.model_dump(mode="json")
    fp = fingerprint(bodies.get(CHAT_PROBE))
    argv = None if launch is None else {"kind": launch.kind, "args": launch.args}
    return Record(
        engine=pins.engine,
        unreachable=unreachable,
        pins=pins,
        seen=seen,
        proved_by={p: s.by for p, s in seen.items() if p in pinned},
        fingerprint=None if fp is None else Fingerprint(version=fp[0], config_hash=fp[1]),
        unverifiable={p: w for p, w in why.items() if p not in seen},
        reported={p: s.value for p, s in seen.items()},
        not_reported=sorted(p for p in why if p not in seen and p in pinned),
        launch=None if argv is None else LaunchShown.model_validate(argv),
        launches=launches or [],
        unpinned=sorted(p for p in PINS if p in pinned and pinned[p] is None),
    )


async def identity(ctx: StageContext) -> StageResult:
    """Every pin judged by `gates/identity/`: seen and compared, or unverifiable with why."""
    pins = ctx.candidate.identity
    engine = adapter(pins.engine)
    client = await ctx.client()
    models = await client.get("/v1/models")
    ctx.keep("v1-models", models)
    bodies: dict[str, object] = {"/v1/models": answer(models)}
    unreachable = None if models.ok else (models.error or f"HTTP {models.status}")
    if unreachable is None:
        bodies.update(await engine_reports(client, engine, pins.model, ctx.keep))
    launch = await launched(ctx)
    record = gather(pins, bodies, launch, unreachable, ctx.lanes.launches)
    return finish(ctx, ctx.judge(record), record)
