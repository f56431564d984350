"""Context ladder: token-exact long prompts, cold and warm, needles at 50% and 99% depth.

For every target (clamped to the per-request window minus the completion margin) and content
kind: size a prompt with the server's tokenizer, send the warm-ups, then time a warm cell (the
warm-up prompt again) and a cold cell (the same document behind a new nonce, so the first cache
block is new, re-counted so it has exactly the warm prompt's tokens), each between two idle
checks. Cold and warm rows are published apart in the typed record (`context.record.Record`).
Every document also hides RULER-style tasks (`qualify.context.tasks`), asked in the warm and
cold cells with the needles as one numbered list, then each alone behind the cached document.
At the deepest rung the tool battery (`qualify.context.battery`) asks typed, streamed and
tool-result calls behind a document of the rung's size.
"""

from __future__ import annotations

import random
import secrets
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace

from qualify.candidate import LoadedCandidate
from qualify.context import battery
from qualify.context.battery import CaseName
from qualify.context.corpus import Kind, Needles, Source, document, messages, new_nonce
from qualify.context.ladder import Cell, run_cell
from qualify.context.record import (
    PASSES,
    Asked,
    Battery,
    Case,
    Content,
    Record,
    Row,
    Rung,
    Warmup,
)
from qualify.context.settings import ContextSettings
from qualify.context.sizing import CHARS_PER_TOKEN, Counter, Sized, SizingError, fit, size
from qualify.context.tasks import Task, Tasks, combined_question
from qualify.httpclient.client import Client, Exchange
from qualify.httpclient.load import Messages
from qualify.records import StageResult
from qualify.serving.dialects import dialect
from qualify.serving.engine import adapter
from qualify.serving.sender import Sender
from qualify.stage import StageContext, finish, unknown_level, validator
from qualify.vram.sampler import Parts, gpu_note, parts_of


def plan_targets(targets: list[int], window: int, margin: int) -> list[Rung]:
    """Each target clamped to the per-request window minus the completion margin. A target that
    clamps to the size of an earlier rung is not run twice: it names that rung in `same_as`."""
    room = window - margin
    rungs: list[Rung] = []
    for t in targets:
        planned = min(t, room)
        same = (r.target for r in rungs if r.planned_tokens == planned and r.same_as is None)
        same_as = next(same, None)
        rungs.append(
            Rung(
                target=t,
                planned_tokens=planned,
                clamped=t > room,
                window=window,
                same_as=same_as,
                wall_s=0.0,
                contents={},
                errors=[],
            )
        )
    return rungs


@validator
def _check_level(loaded: LoadedCandidate) -> list[str]:
    return unknown_level(loaded, "context", loaded.candidate.stages.context.level)


async def window_of(
    engine: str, pinned: int, client: Client, keep: Callable[[str, Exchange], list[str]]
) -> tuple[int, str]:
    """The context one request may use, and where it came from.

    llama-server splits `-c` over its `-np` slots: a request gets `n_ctx` of one slot
    (`/props` `default_generation_settings.n_ctx`, `/v1/models` `meta.n_ctx`), never the total.
    With no report, the pinned `identity.context_length` (what one request may use)."""
    if adapter(engine).context_per_slot:
        ex = await client.get("/props")
        keep("props", ex)
        props = ex.body if ex.ok and isinstance(ex.body, dict) else {}
        gen = props.get("default_generation_settings")
        if isinstance(gen, dict) and isinstance(gen.get("n_ctx"), int):
            return int(gen["n_ctx"]), "/props default_generation_settings.n_ctx (per slot)"
    ex = await client.get("/v1/models")
    keep("v1-models", ex)
    for m in ((ex.body or {}).get("data") or []) if ex.ok else []:
        for key, value in (
            ("max_model_len", m.get("max_model_len")),
            ("meta.n_ctx", (m.get("meta") or {}).get("n_ctx")),
        ):
            if isinstance(value, int):
                return value, f"/v1/models {key}"
    return pinned, "identity.context_length, per request (server reports none)"


@dataclass
class Ladder:
    ctx: StageContext
    settings: ContextSettings
    counter: Counter
    drv: Sender
    rng: random.Random
    seed: int
    rows: list[Row] = field(default_factory=list)
    battery: Battery | None = None
    parts: Parts | None = None
    # tokenizer counts per rung target: sizing its prompts, and fitting its cold prompts
    calls: defaultdict[int, int] = field(default_factory=lambda: defaultdict(int))
    cold_calls: defaultdict[int, int] = field(default_factory=lambda: defaultdict(int))

    def tasks_for(self, r: Rung, kind: Kind, needles: Needles) -> tuple[Tasks, str | None]:
        """The rung's tasks, or none with why: a rung too small to hold their lines twice over
        keeps the needles alone."""
        if not self.settings.tasks:
            return Tasks(), None
        avoid = {n.value for n in needles.pair}
        tasks = Tasks.draw(self.rng, list(self.settings.tasks), avoid)
        chars = sum(len(line) + 3 for _, line in tasks.lines())
        chars += len(combined_question(needles.ask, tasks))
        need = int(2 * chars / CHARS_PER_TOKEN[kind])
        if r.planned_tokens < need:
            return Tasks(), (
                f"no tasks at {r.planned_tokens} tokens: their lines and questions take about "
                f"{need // 2} tokens, more than half the prompt"
            )
        return tasks, None

    async def _size(self, count: Callable[[int], Awaitable[int]], r: Rung, kind: Kind) -> Sized:
        """The rung's prompt sized with the server's tokenizer (`qualify.context.sizing`)."""
        per_token, most = CHARS_PER_TOKEN[kind], self.settings.max_tokenizer_counts
        return await size(count, r.planned_tokens, per_token, most)

    async def rung(self, r: Rung, kind: Kind, deepest: bool = False) -> None:
        s = self.settings
        needles, source, warm_nonce = Needles.draw(self.rng), Source(kind, self.seed), new_nonce()
        tasks, no_tasks = self.tasks_for(r, kind, needles)
        question = combined_question(needles.ask, tasks) if tasks.items else None
        extra = tasks.lines()

        def build(chars: int, nonce: str, q: str | None = question) -> Messages:
            return messages(document(source, chars, needles, extra), needles, nonce, q)

        async def count(chars: int) -> int:
            return await self.counter.count(build(chars, warm_nonce))

        calls0 = self.counter.calls
        try:
            sized = await self._size(count, r, kind)
        except SizingError as exc:
            r.errors.append(f"{kind}: sizing failed: {exc}")
            return
        finally:
            self.calls[r.target] += self.counter.calls - calls0
        doc = document(source, sized.chars, needles, extra)
        info = Content(
            sizing=sized,
            tokenizer_calls=self.counter.calls - calls0,
            method=self.counter.method,
            passes=doc.passes,
            needle_depths=doc.depths,
            needles=list(needles.pair),
            tasks=list(tasks.items),
            tasks_note=no_tasks,
            question=question,
        )
        self.ctx.attempt.write_json(f"sizing-{r.target}-{kind}.json", info.model_dump(mode="json"))
        warm = build(sized.chars, warm_nonce)
        info.warmups = [await self._warmup(r, kind, warm, i) for i in range(s.warmups)]
        r.contents[kind] = info
        info.cold_fits = []
        for pass_ in PASSES:  # warm first: a cold prompt may evict the warm one
            for c in s.concurrency:
                try:
                    prompts = [warm] * c
                    if pass_ == "cold":
                        prompts = [await self.cold(build, sized, info) for _ in range(c)]
                except SizingError as exc:
                    r.errors.append(f"{kind}: sizing a cold prompt failed: {exc}")
                    continue
                cell = Cell(
                    r.target, pass_, kind, r.planned_tokens, sized.tokens, prompts, needles, tasks
                )
                self.rows.append(await run_cell(self.drv, cell, self.parts))
            if pass_ == "warm" and tasks.items:  # each task alone: the prefix cache serves it
                info.asked = [
                    await self.ask(r, kind, build(sized.chars, warm_nonce, t.question), t)
                    for t in tasks.items
                ]
        self.cold_calls[r.target] += self.counter.calls - calls0 - info.tokenizer_calls
        if deepest and s.tool_battery:
            self.battery = await self.tool_battery(r, kind, source, needles)

    async def ask(self, r: Rung, kind: str, msgs: Messages, task: Task) -> Asked:
        """One task asked on its own (warm: the document is in the prefix cache); the rebuild
        checks its answer."""
        drv = replace(self.drv, body={**self.drv.body, "max_tokens": self.settings.task_max_tokens})
        _, files = await drv.send(msgs, f"ctx-{r.target}-{kind}-task-{task.kind}")
        return Asked(kind=task.kind, pass_="warm", form="own question", files=files)

    async def tool_battery(self, r: Rung, kind: Kind, source: Source, needles: Needles) -> Battery:
        """Typed, streamed and tool-result calls behind the deepest rung's document, the
        prompt with its tools sized to the rung's planned tokens (`qualify.context.battery`)."""
        tools, nonce = battery.load_tools(self.ctx.gates_dir), new_nonce()
        out = Battery(
            target=r.target,
            planned_tokens=r.planned_tokens,
            content=kind,
            tools=tools,
            cases=[],
            errors=[],
        )

        def first(chars: int, prompt: str) -> Messages:
            return messages(document(source, chars, needles), needles, nonce, prompt)

        async def count(chars: int) -> int:
            msgs = battery.continuation(first(chars, battery.RESULT_PROMPT))
            return await self.counter.count(msgs, tools)

        s, calls0 = self.settings, self.counter.calls
        try:
            sized = await self._size(count, r, kind)
            call = first(sized.chars, battery.CALL_PROMPT)
            typed_tokens = await self.counter.count(call, tools)
        except SizingError as exc:
            out.errors.append(f"sizing the battery's prompt failed: {exc}")
            return out
        finally:
            out.tokenizer_calls = self.counter.calls - calls0
        out.sizing = sized.model_copy(update={"typed_tokens": typed_tokens})
        base = {**self.drv.body, "max_tokens": s.battery_max_tokens, "tools": tools}
        typed = {**base, "messages": call, "tool_choice": "required"}
        streamed = {**typed, "stream": True, "stream_options": {"include_usage": True}}
        told = battery.continuation(first(sized.chars, battery.RESULT_PROMPT))
        cases: dict[CaseName, object] = {"typed": typed, "streaming": streamed}
        cases["tool-result"] = {**base, "messages": told}
        for case, body in cases.items():
            send = self.drv.client.stream if case == "streaming" else self.drv.client.post
            ex = await send("/v1/chat/completions", body, s.timeout_s)
            files = self.ctx.keep(f"ctx-{r.target}-{kind}-tools-{case}", ex)
            out.cases.append(Case(case=case, files=files))  # read back by the rebuild
        return out

    async def cold(
        self, build: Callable[[int, str], Messages], sized: Sized, info: Content
    ) -> Messages:
        """The rung's document behind a new nonce, with exactly the warm prompt's tokens."""

        async def count(nonce: str, chars: int) -> int:
            return await self.counter.count(build(chars, nonce))

        fitted = await fit(
            count, sized.tokens, sized.chars, new_nonce, self.settings.max_tokenizer_counts
        )
        info.cold_fits.append(fitted)
        return build(fitted.chars, fitted.nonce)

    async def _warmup(self, r: Rung, kind: str, msgs: Messages, i: int) -> Warmup:
        _, files = await self.drv.send(msgs, f"ctx-{r.target}-{kind}-warmup-{i + 1}")
        return Warmup(n=i + 1, files=files)  # its answer: the rebuild's


async def context(ctx: StageContext) -> StageResult:
    """Run the ladder and judge it with the gates `gates/context/` declares."""
    s: ContextSettings = ctx.candidate.stages.context
    t_start = time.perf_counter()
    client = await ctx.client()
    ident = ctx.candidate.identity
    level = s.level or next(iter(ctx.candidate.reasoning))
    fields = ctx.candidate.reasoning[level].request_fields()
    window, window_source = await window_of(ident.engine, ident.context_length, client, ctx.keep)
    rungs = plan_targets(s.targets, window, s.completion_margin)
    seed = secrets.randbits(32)
    body = {"model": ident.model, "max_tokens": s.max_tokens, "temperature": 0, **fields}
    drv = Sender(client, dialect(ident.engine), body, s.timeout_s, s.idle_wait_s, ctx.keep)
    counter = Counter(client, ident.engine, ident.model, fields)
    ladder = Ladder(ctx, s, counter, drv, random.Random(seed), seed, parts=parts_of(ctx.sampler))
    runnable = [r for r in rungs if r.planned_tokens > 0 and r.same_as is None]
    deepest = max(runnable, key=lambda r: r.planned_tokens) if runnable else None
    with ctx.progress.task("context ladder", len(rungs) * len(s.content)) as task:
        for r in rungs:
            t0 = time.perf_counter()
            if r.planned_tokens <= 0:
                r.errors.append(
                    f"window {window} leaves no room after the margin {s.completion_margin}"
                )
            elif r.same_as is not None:
                task.advance(len(s.content), note=f"context {r.target}: same as {r.same_as}")
            else:
                for i, kind in enumerate(s.content):
                    await ladder.rung(r, kind, deepest=r is deepest and i == 0)
                    task.advance(note=f"context {r.planned_tokens} tokens ({kind})")
            r.wall_s = round(time.perf_counter() - t0, 3)
    record = Record(
        targets=rungs,
        rows=ladder.rows,
        tokenizer_calls={str(r.target): ladder.calls[r.target] for r in rungs},
        cold_tokenizer_calls={str(r.target): ladder.cold_calls[r.target] for r in rungs},
        audits=None,  # of this form: derived with the figures from the kept exchanges
        battery=ladder.battery,
        level=level,
        window=window,
        window_source=window_source,
        sizing_method=ladder.counter.method or None,
        seed=seed,
        gpu=gpu_note(ladder.parts, ctx.thresholds.vram_reserve_gib),
        wall_s=round(time.perf_counter() - t_start, 3),
    )
    return finish(ctx, ctx.judge(record), record)
