"""Context ladder: token-exact long prompts, cold and warm, needles at 50% and 99% depth.

For every target (clamped to the window minus the completion margin) and content kind: size a
prompt with the server's tokenizer, send the warm-ups, then time a warm cell (the warm-up
prompt again) and a cold cell (the same document behind a new nonce, so the first cache block
is new), each between two idle checks. Cold and warm rows are published separately.
"""

from __future__ import annotations

import random
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

from qualify.candidate import Candidate, LoadedCandidate
from qualify.context.corpus import Kind, Needles, Source, document, messages, new_nonce
from qualify.context.gates import fidelity, gates
from qualify.context.ladder import Cell, Driver, public, run_cell, stream_problem
from qualify.context.settings import ContextSettings
from qualify.context.sizing import CHARS_PER_TOKEN, Counter, SizingError, size
from qualify.httpclient.client import Client
from qualify.records import StageResult
from qualify.serving.engines import dialect
from qualify.stage import StageContext, finish, stage, validator


@dataclass
class Rung:
    target: int
    planned: int
    clamped: bool
    window: int
    contents: dict[str, Any] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    tokenizer_calls: int = 0
    wall_s: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "planned_tokens": self.planned,
            "clamped": self.clamped,
            "window": self.window,
            "wall_s": round(self.wall_s, 3),
            "contents": self.contents,
            "errors": self.errors,
        }


def plan_targets(targets: list[int], window: int, margin: int) -> list[Rung]:
    """Each target clamped to the window minus the completion margin."""
    room = window - margin
    return [Rung(t, min(t, room), t > room, window) for t in targets]


def level_of(cand: Candidate, s: ContextSettings) -> tuple[str, dict[str, Any]]:
    name = s.level or next(iter(cand.reasoning))
    return name, cand.reasoning[name].request_fields()


@validator
def _check_level(loaded: LoadedCandidate) -> list[str]:
    cand = loaded.candidate
    lvl = cand.stages.context.level
    if "context" not in cand.stages.run or lvl is None or lvl in cand.reasoning:
        return []
    return [
        f"stages.context.level: {lvl!r} is not a reasoning level (expected one of "
        f"{sorted(cand.reasoning)})"
    ]


async def window_of(ctx: StageContext, client: Client) -> tuple[int, str]:
    """The per-request context window the server reports, and where it came from."""
    if ctx.candidate.identity.engine == "llama.cpp":
        ex = await client.get("/props")
        ctx.keep("props", ex)
        gen = (ex.body or {}).get("default_generation_settings") if ex.ok else None
        if isinstance(gen, dict) and isinstance(gen.get("n_ctx"), int):
            return int(gen["n_ctx"]), "/props default_generation_settings.n_ctx"
    ex = await client.get("/v1/models")
    ctx.keep("v1-models", ex)
    for m in ((ex.body or {}).get("data") or []) if ex.ok else []:
        for key, value in (
            ("max_model_len", m.get("max_model_len")),
            ("meta.n_ctx", (m.get("meta") or {}).get("n_ctx")),
        ):
            if isinstance(value, int):
                return value, f"/v1/models {key}"
    return ctx.candidate.identity.context_length, "identity.context_length (server reports none)"


@dataclass
class Ladder:
    ctx: StageContext
    settings: ContextSettings
    counter: Counter
    drv: Driver
    rng: random.Random
    seed: int
    rows: list[dict[str, Any]] = field(default_factory=list)

    async def rung(self, r: Rung, kind: Kind) -> None:
        needles = Needles.draw(self.rng)
        source = Source(kind, self.seed)
        warm_nonce = new_nonce()

        async def count(chars: int) -> int:
            return await self.counter.count(
                messages(document(source, chars, needles), needles, warm_nonce)
            )

        calls0 = self.counter.calls
        try:
            sized = await size(
                count, r.planned, CHARS_PER_TOKEN[kind], self.settings.max_tokenizer_counts
            )
        except SizingError as exc:
            r.tokenizer_calls += self.counter.calls - calls0
            r.errors.append(f"{kind}: sizing failed: {exc}")
            return
        r.tokenizer_calls += self.counter.calls - calls0
        doc = document(source, sized.chars, needles)
        info = {
            "sizing": sized.as_dict(),
            "tokenizer_calls": self.counter.calls - calls0,
            "method": self.counter.method,
            "passes": doc.passes,
            "needle_depths": doc.depths,
            "needles": needles.as_dict(),
        }
        self.ctx.attempt.write_json(f"sizing-{r.target}-{kind}.json", info)
        warm = messages(doc, needles, warm_nonce)
        info["warmups"] = [
            await self._warmup(r, kind, warm, i) for i in range(self.settings.warmups)
        ]
        r.contents[kind] = info
        for pass_ in ("warm", "cold"):  # warm first: a cold prompt may evict the warm one
            for c in self.settings.concurrency:
                prompts = (
                    [warm] * c
                    if pass_ == "warm"
                    else [messages(doc, needles, new_nonce()) for _ in range(c)]
                )
                cell = Cell(r.target, pass_, kind, r.planned, sized.tokens, prompts, needles)
                self.rows.append(warm_note(public(await run_cell(self.drv, cell))))

    async def _warmup(self, r: Rung, kind: str, msgs: Any, i: int) -> dict[str, Any]:
        o, files = await self.drv.send(msgs, f"ctx-{r.target}-{kind}-warmup-{i + 1}")
        return {
            "n": i + 1,
            "problem": stream_problem(o),
            "prompt_tokens": o.prompt_tokens,
            "cached_tokens": o.cached_tokens,
            "e2e_s": o.t_end,
            "files": files,
        }


@stage("context")
async def context(ctx: StageContext) -> StageResult:
    """Needles pass when both come back at every rung; cold-cache when cold prompts miss the
    prefix cache; idle when the engine was idle around every timed cell."""
    s: ContextSettings = ctx.candidate.stages.context
    t_start = time.perf_counter()
    client = await ctx.client()
    ident = ctx.candidate.identity
    level, fields = level_of(ctx.candidate, s)
    window, window_source = await window_of(ctx, client)
    rungs = plan_targets(s.targets, window, s.completion_margin)
    seed = secrets.randbits(32)
    body = {"model": ident.model, "max_tokens": s.max_tokens, "temperature": 0, **fields}
    drv = Driver(client, dialect(ident.engine), body, s.timeout_s, s.idle_wait_s, ctx.keep)
    ladder = Ladder(
        ctx, s, Counter(client, ident.engine, ident.model, fields), drv, random.Random(seed), seed
    )
    with ctx.progress.task("context ladder", len(rungs) * len(s.content)) as task:
        for r in rungs:
            t0 = time.perf_counter()
            if r.planned <= 0:
                r.errors.append(
                    f"window {window} leaves no room after the margin {s.completion_margin}"
                )
            else:
                for kind in s.content:
                    await ladder.rung(r, kind)
                    task.advance(note=f"context {r.planned} tokens ({kind})")
            r.wall_s = time.perf_counter() - t0
    data = {
        "targets": [r.as_dict() for r in rungs],
        "rows": ladder.rows,
        "tokenizer_calls": {str(r.target): r.tokenizer_calls for r in rungs},
        "fidelity": fidelity(ladder.rows),
        "level": level,
        "window_source": window_source,
        "sizing_method": ladder.counter.method or None,
        "seed": seed,
        "wall_s": round(time.perf_counter() - t_start, 3),
    }
    return finish(ctx, gates(rungs_errors(rungs), ladder.rows), data)


def warm_note(row: dict[str, Any]) -> dict[str, Any]:
    """A warm row that was not served from the prefix cache says so (it is still published)."""
    cached, prompt = row.get("cached_tokens"), row.get("actual_prompt_tokens")
    row["notes"] = []
    if row["pass"] != "warm" or not isinstance(cached, int) or not isinstance(prompt, int):
        return row
    if cached < 0.9 * prompt:
        row["notes"].append(
            f"the warm pass reused only {cached} of {prompt} prompt tokens from the cache"
        )
    return row


def rungs_errors(rungs: list[Rung]) -> dict[int, list[str]]:
    return {r.target: r.errors for r in rungs}
