"""The capacity stage's judged data rebuilt from the exchanges an attempt kept (`verify`): every
stream of every timed run measured and judged again from its kept exchange, and every figure the
record derives from them computed again with the stage's own functions; what is not kept raw is
taken from the sealed record and said (`view.trust`). Both lists: docs/trust.md, "Judged again
from the exchanges"; the open-loop load in `qualify.capacity.reload`."""

from __future__ import annotations

import re

from qualify.ab.acceptance import combined
from qualify.capacity.answers import degenerate_answers, judged_cells
from qualify.capacity.incumbent import compare
from qualify.capacity.loads import Load
from qualify.capacity.matrix import cell_key, median_of_runs, run_goodput, saturation
from qualify.capacity.parts import PlannedLength, plan_lengths
from qualify.capacity.record import (
    Comparison,
    KindRow,
    MatrixRow,
    NotRun,
    Record,
    RunRecord,
    Saturation,
    Warmup,
)
from qualify.capacity.reload import (
    PART,
    REPLAY,
    SESSIONS,
    SOAK_ACCEPTANCE,
    given,
    kept_stream,
    rebuild_load,
    replay_again,
)
from qualify.capacity.runs import StreamRec, stream_record, summarize
from qualify.capacity.sessions import sessions_again
from qualify.capacity.settings import CapacitySettings
from qualify.capacity.slo import Slo
from qualify.capacity.stage import INCUMBENT
from qualify.evidence.kept import AttemptView, NotKept
from qualify.preflight.code import check_code

_COUNTED = re.compile(r"^\d{4}-(cap|kind|load)-.+-s\d+\.json$|^\d{4}-soak-s\d+\.json$")

# The checks of the record's later fields: a record of the form before them has no such field,
# and no gates of these checks.
_LOAD = ["capacity-goodput", "capacity-harness", "capacity-soak", SOAK_ACCEPTANCE, REPLAY, SESSIONS]
_LATER = {"load": _LOAD, "answers": ["capacity-answers"]}


def _runs(
    view: AttemptView, sealed: list[RunRecord], name: str, kind: str, want: int, n: int
) -> tuple[list[RunRecord], list[StreamRec]]:
    """A cell's runs measured again (streams from their exchanges, the rest as recorded)."""
    if len(sealed) != n:
        raise NotKept(f"{name}: {len(sealed)} runs recorded, the candidate asks {n}")
    runs, every = [], []
    for r in sealed:
        streams = [kept_stream(view, r.label, i, st, kind, None) for i, st in enumerate(r.streams)]
        if len(streams) != (0 if r.idle.before.idle is False else want):
            raise NotKept(f"{r.label}: {len(streams)} streams kept, the run sends {want}")
        run = summarize(streams, r.window_s if streams else None, **r.model_dump())
        if given(r, "server_generated_tokens"):
            gen, window = r.server_generated_tokens, run.window_s
            run.server_aggregate_tok_s = gen / window if gen is not None and window else None
        runs.append(run)
        every += streams
    return runs, every


def _saturation(
    lane: str, rows: list[MatrixRow], sealed: dict[str, Saturation]
) -> dict[str, Saturation]:
    """Where each length stopped raising concurrency: at the first cell with a failed or cut
    request (from the exchanges), unless a p95 TTFT past the recorded bound stopped it first."""
    out: dict[str, Saturation] = {}
    for length in dict.fromkeys(r.length for r in rows):
        stop = sealed.get(str(length))
        cells = sorted((r for r in rows if r.length == length), key=lambda r: r.concurrency)
        for r in cells:
            why = saturation(r, None)
            if stop and stop.at == r.concurrency and why is None:
                bound = re.search(r"past the bound ([0-9.]+) s", stop.why)
                why = saturation(r, float(bound.group(1))) if bound else None
                if why is None:
                    raise NotKept(f"{lane} {r.cell}: saturated as recorded, not as measured")
            if why is not None:
                out[str(length)] = Saturation(at=r.concurrency, why=why)
                break
    return out


def _matrix(
    view: AttemptView, rec: Record, s: CapacitySettings, slo: Slo | None
) -> tuple[list[MatrixRow], dict[str, dict[str, Saturation]]]:
    engines = {"candidate": rec.engine, INCUMBENT: rec.incumbent.engine}
    rows = []
    for row in rec.matrix:
        c, planned = row.concurrency, row.length
        runs, streams = _runs(view, row.run_records, row.cell, "prose", c, s.runs)
        eng = engines.get(row.lane)
        kv = eng.kv_tokens if eng is not None else None
        need = c * (planned + s.max_tokens)
        cell = {"lane": row.lane, "target": row.target, "cell": cell_key(planned, c)}
        good = run_goodput(runs, streams, slo) if slo is not None else {}
        more = {"length": planned, "concurrency": c, "kv_fits": None if not kv else need <= kv}
        rows.append(median_of_runs(runs, MatrixRow, kv_tokens_needed=need, **cell, **more, **good))
    sat = {}
    for lane in dict.fromkeys(r.lane for r in rows):
        mine = [r for r in rows if r.lane == lane]
        sat[lane] = _saturation(lane, mine, rec.saturation.get(lane) or {})
        for r in mine:
            stop = sat[lane].get(str(r.length))
            r.saturated = stop.why if stop and stop.at == r.concurrency else None
    return rows, sat


def _kinds(view: AttemptView, rec: Record, s: CapacitySettings) -> list[KindRow]:
    rows = []
    for row in rec.kinds:
        if row.error:
            rows.append(row)
            continue
        runs, _ = _runs(view, row.run_records, row.cell, row.kind, 1, s.kind_runs)
        acc = combined([r.acceptance for r in runs if not r.excluded])
        figures = {"kind": row.kind, "depth": row.depth, "target": row.target}
        figures |= {"sized_tokens": row.sized_tokens, "acceptance": acc}
        rows.append(
            median_of_runs(runs, KindRow, acceptance_rate=acc.rate if acc else None, **figures)
        )
    return rows


def _not_run(sat: dict[str, dict[str, Saturation]], s: CapacitySettings) -> list[NotRun]:
    return [
        NotRun(
            lane=lane, cell=cell_key(int(planned), c), why=f"saturated at c={stop.at}: {stop.why}"
        )
        for lane, stops in sat.items()
        for planned, stop in stops.items()
        for c in s.concurrency[s.concurrency.index(stop.at) + 1 :]
    ]


def _complete(view: AttemptView, rec: Record) -> None:
    """Every counted exchange the attempt kept (not a warm-up, not the engine's) belongs to a
    stream of the record: none was left out of it."""
    ld = rec.load
    runs = [run for row in [*rec.matrix, *rec.kinds] for run in row.run_records]
    cells = [*ld.cells, *(ld.incumbent.cells if ld.incumbent else []), *ld.replay]
    files = [st.files for run in runs for st in run.streams]
    files += [st.files for c in cells for st in c.streams]
    files += [st.files for st in (ld.soak.streams if ld.soak else [])]
    files += [t.files for t in (ld.sessions.turns if ld.sessions else [])]
    named = {PART.sub("", f[0]) for f in files if f}
    kept = [n for n in view.names() if _COUNTED.match(n) and n not in named]
    if kept:
        raise NotKept(f"kept exchanges no run of the record holds: {kept[:3]}")


def _lengths(
    rec: Record, s: CapacitySettings, window: int | None
) -> dict[str, list[PlannedLength]]:
    """The planned lengths again (the lane's window as the engine reported it); the sizing's
    outcome (tokens, errors) as recorded."""
    out = rec.lengths
    if window is not None and "candidate" in out:
        planned = plan_lengths(s.lengths, window, s.max_tokens)
        again = zip(planned, out["candidate"], strict=False)
        redone = [
            r.model_copy(update=p.model_dump(exclude={"errors", "sized_tokens"})) for p, r in again
        ]
        out["candidate"] = redone + out["candidate"][len(redone) :]
    return out


def _settings(view: AttemptView) -> CapacitySettings:
    if view.candidate is None:
        raise NotKept("no signed candidate copy in the run")
    s = view.candidate.stages.capacity
    mine = s.model_dump(mode="json")
    recorded = view.sealed.get("settings") or {}
    if any(mine.get(k, v) != v or k not in mine for k, v in recorded.items()):
        raise NotKept("its settings are not the signed candidate copy's stages.capacity")
    return s


def rebuild(view: AttemptView) -> Record:
    """The capacity stage's record as its kept exchanges give it (see the module docstring):
    the fields its sealed form has."""
    sealed = view.sealed  # the sealed record's data, raw JSON: which fields it wrote
    rec = Record.model_validate(sealed)
    if rec.check_code != (now := check_code("capacity")):
        view.other_code(rec.check_code, "capacity", now)
    s = _settings(view)
    for field, checks in _LATER.items():
        if not given(rec, field):
            view.earlier_form(checks, f"the record predates the capacity {field} (no {field})")
    if any(not given(r, "energy") for r in rec.matrix):
        view.earlier_form(["capacity-energy"], "the record predates energy per cell")
    slo = rec.slo if given(rec.slo) else None
    view.trust("each timed window, the idle checks and the /metrics reads around every run")
    view.trust("the power meter's joules over each window")
    view.trust("the engine's reported capacity and the sized prompt lengths")
    if slo is not None:
        view.trust("the SLOs the run was given (the house's, tightened by the candidate's)")
    rows, sat = _matrix(view, rec, s, slo)
    krows = _kinds(view, rec, s)
    ld = rec.load
    load = rebuild_load(view, ld, s, slo) if "load" in sealed else {}
    if ld.replay and slo is not None:
        view.trust("each replayed request's send offset and prompt (the trace its cell names)")
        load["replay"] = [replay_again(view, c, s, slo) for c in ld.replay]
    if ld.sessions is not None and given(ld.sessions) and slo is not None:
        load["sessions"] = sessions_again(view, ld.sessions, slo)
    _complete(view, rec)
    window = rec.engine.context_per_request
    if window is None and view.candidate is not None:
        window = view.candidate.identity.context_length
    again = Load.model_validate(load)
    data = {
        "lengths": _lengths(rec, s, window),
        "matrix": rows,
        "not_run": _not_run(sat, s),
        "saturation": sat,
        "kinds": krows,
        "degenerate": degenerate_answers([*rows, *krows]),
        "answers": judged_cells(rows, krows, again),
        "expected": s.expected,
        "comparison": _comparison(rec, rows),
        "warmups": _warmups(view, rec.warmups),
        "load": again,
    }
    return rec.model_copy(update={k: v for k, v in data.items() if k in sealed})


def _comparison(rec: Record, matrix: list[MatrixRow]) -> list[Comparison]:
    if rec.incumbent.status != "measured":
        return []
    cand = {r.cell: r.run_values for r in matrix if r.lane == "candidate"}
    inc = {r.cell: r.run_values for r in matrix if r.lane == INCUMBENT}
    return compare(cand, inc, seed=rec.seed)


def _warmups(view: AttemptView, warmups: dict[str, list[Warmup]]) -> dict[str, list[Warmup]]:
    """Each warm-up's completion tokens from its exchange."""
    for items in warmups.values():
        for w in items:
            if not w.files:
                raise NotKept(f"warm-up {w.label} {w.n}: names no kept exchange")
            ex = view.exchange(PART.sub("", w.files[0]))
            w.completion_tokens = stream_record(ex, w.files)["completion_tokens"]
    return warmups
