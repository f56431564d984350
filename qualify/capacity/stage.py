"""Capacity: prompt lengths × concurrency, per-kind decode at depth, what the engine says it can
hold, the open-loop load, and the incumbent measured the same way beside it. The lanes
alternate run by run (`turns`: candidate, incumbent, incumbent, candidate, …) so that servers
switch as little as possible; each turn warms each length up first (kept, never counted).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from qualify.ab.kv import read_server_log
from qualify.candidate import Candidate, LoadedCandidate
from qualify.capacity import record as rec
from qualify.capacity.answers import answer_code
from qualify.capacity.edge import incumbent_edge
from qualify.capacity.engine import engine_capacity
from qualify.capacity.incumbent import find_incumbent
from qualify.capacity.knee import LaneArgs, open_cell, search
from qualify.capacity.loads import (
    Edge,
    Knee,
    Load,
    OpenCell,
    ReplayCell,
    Sessions,
    Soak,
    soak_rate_from,
)
from qualify.capacity.matrix import cell_key, median_of_runs, saturation
from qualify.capacity.openloop import burst
from qualify.capacity.parts import PlannedLength, plan_lengths
from qualify.capacity.plot import PLOT, plot
from qualify.capacity.prompts import Prompts
from qualify.capacity.replay import replays
from qualify.capacity.runs import timed_run
from qualify.capacity.sessions import run_sessions
from qualify.capacity.settings import CapacitySettings, DecodeKind
from qualify.capacity.slo import Slo, effective
from qualify.capacity.soak import SOAK_SEED, rss_mib, soak
from qualify.capacity.spread import around
from qualify.capacity.trace import KEPT_TRACE, read_trace, trace_path
from qualify.context.sizing import Counter, SizingError
from qualify.errors import BadInput
from qualify.progress import Task
from qualify.records import StageResult
from qualify.serving.dialects import dialect
from qualify.serving.idle import wait_idle
from qualify.serving.lanes import api_key
from qualify.serving.process import StartFailed
from qualify.serving.sender import Sender
from qualify.stage import StageContext, finish, unknown_level, validator
from qualify.vram.energy import NO_TELEMETRY, window_energy
from qualify.vram.sampler import Sampler

INCUMBENT = "incumbent"


@validator
def _check_level(loaded: LoadedCandidate) -> list[str]:
    return unknown_level(loaded, "capacity", loaded.candidate.stages.capacity.level)


def request_fields(cand: Candidate, s: CapacitySettings) -> dict[str, object]:
    """The lane's request fields: model, budget, the named level's fields (else its first)."""
    name = s.level if s.level in cand.reasoning else next(iter(cand.reasoning), None)
    fields = cand.reasoning[name].request_fields() if name is not None else {}
    body: dict[str, object] = {"model": cand.identity.model, "max_tokens": s.max_tokens}
    return body | {"temperature": 0, **fields} | ({"ignore_eos": True} if s.ignore_eos else {})


def turns(runs: int, incumbent: bool) -> list[tuple[str, list[int]]]:
    """(lane, run numbers) in order: alternating ABBA… with an incumbent, else one turn."""
    if not incumbent:
        return [("candidate", list(range(1, runs + 1)))]
    out = []
    for r in range(1, runs + 1):
        pair = ("candidate", INCUMBENT) if r % 2 else (INCUMBENT, "candidate")
        out += [(lane, [r]) for lane in pair]
    return out


@dataclass
class Lane:
    """One lane's state over its turns: how it is asked, its plan, its sized prompts, its runs."""

    name: str
    sender: Sender
    counter: Counter
    window: int
    lengths: list[PlannedLength]
    engine: rec.Engine
    prompts: dict[tuple[str, int], Prompts] = field(default_factory=dict)
    runs: dict[tuple[int, int], list[rec.RunRecord]] = field(default_factory=dict)
    saturated: dict[int, rec.Saturation] = field(default_factory=dict)
    warmups: list[rec.Warmup] = field(default_factory=list)


@dataclass
class Capacity:
    ctx: StageContext
    s: CapacitySettings
    seed: int
    lanes: dict[str, Lane] = field(default_factory=dict)
    slo: Slo = field(default_factory=Slo)

    def __post_init__(self) -> None:
        self.slo = effective(self.ctx.thresholds, self.s.slo)

    def meter(self, t0: float, t1: float) -> dict[str, object]:
        """Energy over a monotonic window, from the run's GPU sampler (unmeasured without)."""
        sampler = self.ctx.sampler
        if isinstance(sampler, Sampler):
            return sampler.energy(t0, t1)
        return window_energy({}, t0, t1) | {"why": NO_TELEMETRY}

    def memory(self) -> tuple[Callable[[], float | None], str | None]:
        """The soak's server memory: GPU used memory, else the server process's RSS, else none."""
        sampler = self.ctx.sampler
        if isinstance(sampler, Sampler) and sampler.used_mib() is not None:
            return sampler.used_mib, "GPU used memory (sampler, every card)"
        proc = getattr(self.ctx.lanes, "process", None)
        pid = getattr(getattr(proc, "proc", None), "pid", None)
        if pid is not None and rss_mib(pid) is not None:
            return (lambda: rss_mib(pid)), "server process RSS (/proc)"
        return (lambda: None), None

    async def load(self, lane: Lane, task: Task) -> Load:
        """The knee search, the burst and the soak on one lane, at one prompt length."""
        s, kind, lag = self.s, self.s.load.kind, self.ctx.thresholds.client_max_lag_ms
        target = s.load.length or s.lengths[0]
        (planned,) = plan_lengths([target], lane.window, s.max_tokens)
        out: dict[str, object] = dict(length=planned, slo=self.slo, lane=lane.name, kind=kind)
        if planned.errors:
            return Load.model_validate(out | {"error": "; ".join(planned.errors)})
        try:
            n = planned.planned_tokens
            p = await self.prompts(lane, kind, n, f"load-{lane.name}-{n}")
        except SizingError as exc:
            return Load.model_validate(out | {"error": f"sizing failed: {exc}"})
        common = LaneArgs(
            kind=kind, max_tokens=s.max_tokens, slo=self.slo, lag_bound_ms=lag, meter=self.meter
        )
        text, tick = self.trace(lane), partial(task.advance, 1)
        drain = float(self.slo.e2e_s or 60.0) + s.load.drain_s  # the burst's and the replay's
        if s.load.enabled:
            rows = read_trace(text) if text else None
            out |= await search(
                lane.sender, p.fresh, s.load, seed=self.seed, advance=tick, rows=rows, **common
            )
        ld = Load.model_validate(out)
        if s.load.enabled and (n := s.load.burst):  # n requests at once: a spike
            b = await open_cell(
                lane.sender, p.fresh, burst(n), label=f"load-burst-{n}", drain_s=drain, **common
            )
            b |= {"arrival": "burst", "rate_rps": None, "cell": f"burst-{n}"}
            ld.cells.append(OpenCell.model_validate(b))
            tick(f"capacity burst of {n}")
        if s.soak.enabled:
            ld.soak = Soak.model_validate(await self.soak_step(lane, p, ld, common))
            tick("capacity soak")
        if text:  # the candidate's trace, at each of its scales
            got = await replays(lane.sender, text, s.replay, common, drain)
            ld.replay = [ReplayCell.model_validate(c) for c in got]
        if n := s.sessions.count:  # agent sessions, each turn on the previous answers
            runs = await run_sessions(lane.sender, n, s.sessions.max_tokens)
            ld.sessions = Sessions.model_validate(runs)
        return ld

    def trace(self, lane: Lane) -> str | None:
        """The candidate's replay trace, kept in the attempt (`KEPT_TRACE`) for `verify`."""
        if not self.s.replay.trace:
            return None
        where = self.ctx.lanes.loaded[lane.name].directory
        text = trace_path(where, self.s.replay.trace).read_text()
        if not (self.ctx.attempt.path / KEPT_TRACE).exists():
            self.ctx.attempt.write_text(KEPT_TRACE, text)
        return text

    async def soak_step(
        self, lane: Lane, p: Prompts, ld: Load, common: LaneArgs
    ) -> dict[str, object]:
        """The soak at the candidate's rate, else a fraction of the knee the search found."""
        s, t = self.s, self.ctx.thresholds
        knee = ld.knee or Knee()
        rate, rate_from = s.soak.rate_rps, soak_rate_from(s.soak.rate_rps, knee.rate_rps)
        if rate is None:
            tried = [c.rate_rps for c in ld.cells if c.rate_rps]
            rate = s.soak.rate_fraction * (knee.rate_rps or min(tried or [s.load.start_rps]))
        memory, source = self.memory()
        await wait_idle(lane.sender.client, lane.sender.dialect, s.idle_wait_s)
        got = await soak(
            lane.sender,
            p.fresh,
            rate_rps=rate,
            duration_s=max(t.soak_duration_s, s.soak.duration_s or 0.0),
            stall_s=t.soak_stall_s,
            health_path=self.ctx.lanes.loaded[lane.name].candidate.server.health_path,
            seed=self.seed + SOAK_SEED,
            memory=memory,
            memory_source=source,
            poll_s=s.soak.poll_s,
            **common,
        )
        return {**got, "rate_from": rate_from}

    async def loads(self, incumbent: bool, ran: list[str], task: Task) -> Load:
        """The candidate's load, then the incumbent at the candidate's edge (`capacity.edge`)."""
        out = await self.load(await self.lane("candidate"), task)
        ran.append("candidate load")
        if not (incumbent and self.s.load.enabled):
            return out
        try:
            lane = await self.lane(INCUMBENT)
        except StartFailed as exc:
            out.incumbent = Edge(status="unreachable", why=str(exc), cells=[])
            return out
        out.incumbent = await incumbent_edge(self, lane, out, task)
        ran.append("incumbent at the candidate's edge")
        return out

    async def lane(self, name: str) -> Lane:
        client = await self.ctx.client(name)
        if known := self.lanes.get(name):
            known.sender.client = known.counter.client = client
            return known
        cand: Candidate = self.ctx.lanes.loaded[name].candidate
        ident = cand.identity
        if name == INCUMBENT:
            ex = await client.get(cand.server.health_path)
            if not ex.ok:
                why = ex.error or f"HTTP {ex.status}"
                raise StartFailed(f"{cand.server.base_url}{cand.server.health_path}: {why}")
        proc = getattr(self.ctx.lanes, "process", None)
        log = read_server_log(proc.attempt.path if proc is not None else None)
        eng = await engine_capacity(ident.engine, client, self.ctx.keep, log)
        window = eng.context_per_request or ident.context_length
        body = request_fields(cand, self.s)
        fields = {k: v for k, v in body.items() if k not in ("model", "max_tokens", "temperature")}
        d = dialect(ident.engine)
        sender = Sender(client, d, body, self.s.timeout_s, self.s.idle_wait_s, self.ctx.keep)
        counter = Counter(client, ident.engine, ident.model, fields)
        lengths = plan_lengths(self.s.lengths, window, self.s.max_tokens)
        self.lanes[name] = Lane(name, sender, counter, window, lengths, eng)
        return self.lanes[name]

    async def prompts(self, lane: Lane, kind: DecodeKind, planned: int, warm: str = "") -> Prompts:
        """The lane's prompts at `planned` tokens; warmed as `warm`, if named, once sized."""
        key = (kind, planned)
        if key not in lane.prompts:
            p = Prompts(lane.counter, kind, self.seed, self.s.max_tokenizer_counts)
            await p.size(planned)
            lane.prompts[key] = p
            if warm:
                await self.warm(lane, p, warm)
        return lane.prompts[key]

    async def warm(self, lane: Lane, p: Prompts, label: str) -> None:
        for i in range(self.s.warmups):  # each one's tokens are the rebuild's
            _, files = await lane.sender.send(await p.fresh(), f"{label}-warmup{i + 1}")
            lane.warmups.append(rec.Warmup(label=label, n=i + 1, files=files))

    async def matrix_turn(
        self, name: str, runs: list[int], inc_info: rec.Incumbent, task: Task
    ) -> bool:
        """One lane's turn of matrix runs; False where the incumbent is missing (`inc_info` why)."""
        levels = self.s.concurrency
        # the saturation bound: the house's, or the candidate's where it is tighter
        bounds = [self.s.max_ttft_p95_s, self.ctx.thresholds.capacity_max_ttft_p95_s]
        bound = min((b for b in bounds if b is not None), default=None)
        if name == INCUMBENT and inc_info.status != "found":
            task.advance(len(self.s.lengths) * len(levels) * len(runs))
            return False
        try:
            lane = await self.lane(name)
        except StartFailed as exc:
            if name != INCUMBENT:
                raise
            inc_info.status, inc_info.why = "unreachable", str(exc)
            return False
        for length in (r for r in lane.lengths if not r.same_as and not r.errors):
            planned = length.planned_tokens
            try:
                p = await self.prompts(lane, "prose", planned)
                await self.warm(lane, p, f"cap-{lane.name}-{planned}")
            except SizingError as exc:
                length.errors.append(f"sizing failed: {exc}")
                task.advance(len(levels) * len(runs))
                continue
            length.sized_tokens = p.sized.tokens if p.sized else None
            for i, c in enumerate(levels):
                stop = lane.saturated.get(planned)
                if stop is not None and i > levels.index(stop.at):
                    task.advance(len(runs))
                    continue
                for run in runs:
                    try:
                        prompts = [await p.fresh() for _ in range(c)]
                    except SizingError as exc:
                        length.errors.append(f"sizing a c={c} prompt failed: {exc}")
                        task.advance()
                        continue
                    label = f"cap-{lane.name}-{planned}-c{c}-r{run}"
                    timed = await timed_run(lane.sender, prompts, label, "prose", self.meter)
                    timed.run = run
                    lane.runs.setdefault((planned, c), []).append(timed)
                    task.advance(note=f"capacity {lane.name} {planned} tokens c={c} run {run}")
                cell = median_of_runs(lane.runs.get((planned, c), []), rec.CellFigures)
                why = saturation(cell, bound)
                if why and planned not in lane.saturated:
                    lane.saturated[planned] = rec.Saturation(at=c, why=why)
        return True

    async def kinds(self, lane: Lane, task: Task) -> list[rec.KindRow]:
        rows = []
        depths = plan_lengths(self.s.depths, lane.window, self.s.max_tokens)
        warmed = False
        for d in (x for x in depths if not x.same_as and not x.errors):
            n = d.planned_tokens
            for kind in self.s.kinds:
                row: dict[str, object] = {"kind": kind, "depth": n, "target": d.target}
                try:
                    p = await self.prompts(lane, kind, n)
                    if not warmed:
                        await self.warm(lane, p, f"kind-{kind}-{n}")
                        warmed = True
                    runs = []
                    for r in range(1, self.s.kind_runs + 1):
                        label, one = f"kind-{kind}-{n}-r{r}", [await p.fresh()]
                        timed = await timed_run(lane.sender, one, label, kind, self.meter)
                        timed.run = r
                        runs.append(timed)
                        task.advance(note=f"capacity {kind} at {n} run {r}")
                except SizingError as exc:
                    err = {"error": f"sizing failed: {exc}", "counted_runs": 0, "runs": 0}
                    err.update(excluded_runs=[], failed=0, cut=0, requests=0)
                    rows.append(rec.KindRow.model_validate({**row, **err}))
                    continue
                sized = p.sized.tokens if p.sized else None
                row.update(sized_tokens=sized, run_records=runs)
                rows.append(rec.KindRow.model_validate(row))
        return rows


def _rows(lane: Lane, s: CapacitySettings) -> list[rec.MatrixRow]:
    """The lane's cells as run: their runs; their figures are the rebuild's (`capacity.rebuild`)."""
    out = []
    for length in (r for r in lane.lengths if not r.same_as):
        for c in s.concurrency:
            if runs := lane.runs.get((length.planned_tokens, c)):
                planned, cell = length.planned_tokens, cell_key(length.planned_tokens, c)
                row = {"lane": lane.name, "cell": cell, "length": planned, "concurrency": c}
                row.update(target=length.target, run_records=runs)
                out.append(rec.MatrixRow.model_validate(row))
    return out


async def _incumbent_lane(ctx: StageContext, s: CapacitySettings) -> rec.Incumbent:
    """Find the incumbent and add it as a lane; what was found goes in `data.incumbent`."""
    if not s.incumbent:
        return rec.Incumbent(status="none", why="stages.capacity.incumbent is false")
    # the house the run was given, once the stage context carries it (else the default house)
    house: Path | None = getattr(ctx, "house", None)
    inc, info = find_incumbent(ctx.loaded, house)
    try:
        if inc is not None:
            ctx.run.redactor.add(api_key(inc))
            ctx.lanes.loaded[INCUMBENT] = inc  # status "found"
    except BadInput as exc:
        info.update(status="unusable", why="; ".join(exc.problems))
    return rec.Incumbent.model_validate(info)


def _plot(ctx: StageContext, record: rec.Record) -> list[str]:
    """The stage's plot into its evidence; one that cannot be drawn is a reason, never a stop."""
    slots = record.engine.slots or getattr(ctx.candidate.identity, "max_num_seqs", None)
    title = f"{ctx.candidate.name}: aggregate output tok/s by concurrency"
    try:
        ctx.attempt.write_bytes(PLOT, plot(record.matrix, title, slots, record.load))
    except Exception as exc:  # a drawing failure of any kind, never the measurement's
        return [f"plot not drawn: {type(exc).__name__}: {exc}"]
    return []


async def capacity(ctx: StageContext) -> StageResult:
    """The matrix, per-kind decode, engine capacity and the incumbent; `ctx.judge` decides."""
    s: CapacitySettings = ctx.candidate.stages.capacity
    t0 = time.perf_counter()
    cap = Capacity(ctx, s, secrets.randbits(32))
    inc_info = await _incumbent_lane(ctx, s)
    found = inc_info.status == "found"
    order = turns(s.runs, found)
    steps = len(s.kinds) * len(s.depths) * s.kind_runs + s.soak.enabled
    steps += (s.load.max_steps + s.load.refine + bool(s.load.burst) + 2 * found) * s.load.enabled
    cells = len(s.lengths) * len(s.concurrency)
    kinds: list[rec.KindRow] = []
    load = Load()
    ran: list[str] = []
    try:
        with ctx.progress.task("capacity", steps + sum(cells * len(r) for _, r in order)) as task:
            lane = await cap.lane("candidate")
            kinds = await cap.kinds(lane, task) if s.kinds else []
            for name, runs in order:
                if await cap.matrix_turn(name, runs, inc_info, task):
                    ran.append(f"{name} run {','.join(map(str, runs))}")
            if s.loads:
                load = await around(cap, cap.loads(inc_info.status == "found", ran, task))
    finally:
        if INCUMBENT in ctx.lanes.loaded:
            if ctx.lanes.current == INCUMBENT:
                await ctx.lanes.stop()
            del ctx.lanes.loaded[INCUMBENT]
    if INCUMBENT in cap.lanes and inc_info.status == "found":
        inc_info.status, inc_info.engine = "measured", cap.lanes[INCUMBENT].engine
    data = {
        "settings": s.model_dump(mode="json"),
        "lengths": {name: ln.lengths for name, ln in cap.lanes.items()},
        "matrix": [row for ln in cap.lanes.values() for row in _rows(ln, s)],
        "saturation": {
            name: {str(k): v for k, v in ln.saturated.items()} for name, ln in cap.lanes.items()
        },
        "kinds": kinds,
        "engine": cap.lanes["candidate"].engine if "candidate" in cap.lanes else rec.Engine(),
        "slo": cap.slo,
        "load": load,
        "incumbent": inc_info,
        "order": ran,
        "warmups": {name: ln.warmups for name, ln in cap.lanes.items()},
        "plot": PLOT,
        "seed": cap.seed,
        "wall_s": round(time.perf_counter() - t0, 3),
    }
    # derived from the kept exchanges by the rebuild (`capacity.rebuild`), named here so that
    # its record holds them
    data |= {"not_run": [], "degenerate": [], "answers": {}, "expected": [], "comparison": []}
    record = rec.Record.model_validate(data | {"check_code": answer_code()})
    result = finish(ctx, ctx.judge(record), record)
    # drawn from the record the kept exchanges give (the draft's figures are the rebuild's)
    result.reasons[:0] = _plot(ctx, rec.Record.model_validate(result.data))
    return result
