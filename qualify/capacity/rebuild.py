"""The capacity stage's judged data rebuilt from the exchanges an attempt kept (`verify`): every
stream of every timed run measured and judged again from its kept exchange, and every figure the
record derives from them computed again with the stage's own functions; what is not kept raw is
taken from the sealed record and said (`view.trust`). Both lists: docs/trust.md, "Judged again
from the exchanges"; the open-loop load in `qualify.capacity.reload`."""

from __future__ import annotations

import copy
import re
from typing import Any

from qualify.ab.acceptance import combine
from qualify.capacity.answers import degenerate_answers, judged_cells
from qualify.capacity.incumbent import compare
from qualify.capacity.loads import Load, Sessions
from qualify.capacity.matrix import cell_key, median_of_runs, public_runs, run_goodput, saturation
from qualify.capacity.parts import plan_lengths
from qualify.capacity.record import Comparison, KindRow, MatrixRow, Record
from qualify.capacity.reload import REPLAY, SESSIONS, SOAK_ACCEPTANCE, kept_stream, rebuild_load
from qualify.capacity.replay import replay_again
from qualify.capacity.runs import exclusion, stream_record, summarize
from qualify.capacity.sessions import sessions_again
from qualify.capacity.settings import CapacitySettings
from qualify.capacity.slo import Slo
from qualify.capacity.stage import INCUMBENT
from qualify.evidence.kept import AttemptView, NotKept
from qualify.preflight.code import check_code

_PART = re.compile(r"\.part\d{3}$")
_COUNTED = re.compile(r"^\d{4}-(cap|kind|load)-.+-s\d+\.json$|^\d{4}-soak-s\d+\.json$")

# The checks of the record's later fields: a record of the form before them has no such field,
# and no gates of these checks.
_LATER = {
    "load": [
        "capacity-goodput",
        "capacity-harness",
        "capacity-soak",
        SOAK_ACCEPTANCE,
        REPLAY,
        SESSIONS,
    ],
    "answers": ["capacity-answers"],
}


def _run(view: AttemptView, sealed: dict[str, Any], kind: str, want: int) -> dict[str, Any]:
    """One timed run measured again: its streams from their exchanges, the rest as recorded."""
    run = copy.deepcopy(sealed)
    label = str(sealed.get("label"))
    sent = sealed.get("streams") or []
    streams = [kept_stream(view, label, i, st, kind, None) for i, st in enumerate(sent)]
    idle = ((sealed.get("idle") or {}).get("before") or {}).get("idle")
    if len(streams) != (0 if idle is False else want):
        raise NotKept(f"{label}: {len(streams)} streams kept, the run sends {want}")
    run["streams"] = streams
    run.update(summarize(streams, sealed.get("window_s") if streams else None))
    gen = sealed.get("server_generated_tokens")
    if "server_generated_tokens" in sealed:
        window = run["window_s"]
        run["server_aggregate_tok_s"] = gen / window if gen is not None and window else None
    run["excluded"] = exclusion(run)
    return run


def _runs(
    view: AttemptView, row: dict[str, Any], name: str, kind: str, want: int, n: int
) -> dict[str, Any]:
    """A cell's runs measured again, and its figures over them."""
    sealed = row.get("run_records") or []
    if len(sealed) != n:
        raise NotKept(f"{name}: {len(sealed)} runs recorded, the candidate asks {n}")
    runs = [_run(view, r, kind, want) for r in sealed]
    idle = any(r["idle"]["before"]["idle"] is None for r in runs)
    return {**median_of_runs(runs), "idle_unknown": idle, "_runs": runs}


def _saturation(
    lane: str, rows: list[dict[str, Any]], sealed: dict[str, Any]
) -> dict[str, dict[str, Any]]:
    """Where each length stopped raising concurrency: at the first cell with a failed or cut
    request (from the exchanges), unless a p95 TTFT past the recorded bound stopped it first."""
    out: dict[str, dict[str, Any]] = {}
    for length in dict.fromkeys(r["length"] for r in rows):
        stop = sealed.get(str(length))
        cells = sorted((r for r in rows if r["length"] == length), key=lambda r: r["concurrency"])
        for r in cells:
            why = saturation(r, None)
            if stop and stop.get("at") == r["concurrency"] and why is None:
                bound = re.search(r"past the bound ([0-9.]+) s", str(stop.get("why")))
                why = saturation(r, float(bound.group(1))) if bound else None
                if why is None:
                    raise NotKept(f"{lane} {r['cell']}: saturated as recorded, not as measured")
            if why is not None:
                out[str(length)] = {"at": r["concurrency"], "why": why}
                break
    return out


def _matrix(
    view: AttemptView, sealed: dict[str, Any], s: CapacitySettings, slo: Slo | None
) -> tuple[list[Any], dict[str, Any]]:
    engines = {"candidate": sealed.get("engine") or {}}
    engines[INCUMBENT] = (sealed.get("incumbent") or {}).get("engine") or {}
    rows, sat = [], {}
    for row in sealed.get("matrix") or []:
        c, planned = int(row["concurrency"]), int(row["length"])
        cell = _runs(view, row, str(row.get("cell")), "prose", c, s.runs)
        kv = engines.get(row.get("lane", "candidate"), {}).get("kv_tokens")
        need = c * (planned + s.max_tokens)
        rows.append(
            {
                **{k: row.get(k) for k in ("lane", "target")},
                "cell": cell_key(planned, c),
                "length": planned,
                "concurrency": c,
                **cell,
                **(run_goodput(cell["_runs"], slo) if slo is not None else {}),
                "kv_tokens_needed": need,
                "kv_fits": None if not kv else need <= kv,
            }
        )
    for lane in dict.fromkeys(r["lane"] for r in rows):
        mine = [r for r in rows if r["lane"] == lane]
        sat[lane] = _saturation(lane, mine, (sealed.get("saturation") or {}).get(lane) or {})
        for r in mine:
            stop = sat[lane].get(str(r["length"]))
            r["saturated"] = stop["why"] if stop and stop["at"] == r["concurrency"] else None
    return rows, sat


def _kinds(view: AttemptView, sealed: dict[str, Any], s: CapacitySettings) -> list[Any]:
    rows = []
    for row in sealed.get("kinds") or []:
        if row.get("error"):
            rows.append(copy.deepcopy(row))
            continue
        cell = _runs(view, row, f"{row['kind']}@{row['depth']}", row["kind"], 1, s.kind_runs)
        acc = combine([r.get("acceptance") for r in cell["_runs"] if not r["excluded"]])
        rows.append(
            {
                **{k: row.get(k) for k in ("kind", "depth", "target", "sized_tokens")},
                **cell,
                "acceptance_rate": acc.get("rate") if acc else None,
                "acceptance": acc,
            }
        )
    return rows


def _not_run(sat: dict[str, dict[str, Any]], s: CapacitySettings) -> list[dict[str, Any]]:
    out = []
    for lane, stops in sat.items():
        for planned, stop in stops.items():
            for c in s.concurrency[s.concurrency.index(stop["at"]) + 1 :]:
                why = f"saturated at c={stop['at']}: {stop['why']}"
                out.append({"lane": lane, "cell": cell_key(int(planned), c), "why": why})
    return out


def _complete(view: AttemptView, rows: list[dict[str, Any]], load: dict[str, Any]) -> None:
    """Every counted exchange the attempt kept (not a warm-up, not the engine's) belongs to a
    stream of the record: none was left out of it."""
    edge = (load.get("incumbent") or {}).get("cells") or []
    cells = [*(load.get("cells") or []), *edge, load.get("soak") or {}]
    cells += [*(load.get("replay") or []), {"streams": (load.get("sessions") or {}).get("turns")}]
    streams = [st for row in rows for run in row["_runs"] for st in run["streams"]]
    streams += [st for c in cells for st in c.get("streams") or []]
    named = {_PART.sub("", str(f)) for st in streams for f in (st.get("files") or [])[:1]}
    kept = [n for n in view.names() if _COUNTED.match(n) and n not in named]
    if kept:
        raise NotKept(f"kept exchanges no run of the record holds: {kept[:3]}")


def _lengths(sealed: dict[str, Any], s: CapacitySettings, window: int | None) -> dict[str, Any]:
    """The planned lengths again (the lane's window as the engine reported it); the sizing's
    outcome (tokens, errors) as recorded."""
    out = copy.deepcopy(sealed.get("lengths") or {})
    if window is not None and "candidate" in out:
        planned = plan_lengths(s.lengths, window, s.max_tokens)
        for p, r in zip(planned, out["candidate"], strict=False):
            r.update(p.model_dump(exclude={"errors", "sized_tokens"}))
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
    sealed = copy.deepcopy(view.sealed)
    if sealed.get("check_code") != (now := check_code("capacity")):
        view.other_code(sealed.get("check_code"), "capacity", now)
    s = _settings(view)
    for field, checks in _LATER.items():
        if field not in sealed:
            view.earlier_form(checks, f"the record predates the capacity {field} (no {field})")
    if any("energy" not in r for r in sealed.get("matrix") or []):
        view.earlier_form(["capacity-energy"], "the record predates energy per cell")
    slo = Slo.model_validate(sealed["slo"]) if sealed.get("slo") else None
    view.trust("each timed window, the idle checks and the /metrics reads around every run")
    view.trust("the power meter's joules over each window")
    view.trust("the engine's reported capacity and the sized prompt lengths")
    if slo is not None:
        view.trust("the SLOs the run was given (the house's, tightened by the candidate's)")
    matrix, sat = _matrix(view, sealed, s, slo)
    kinds = _kinds(view, sealed, s)
    load = rebuild_load(view, sealed.get("load"), s, slo)
    if load and load.get("replay") and slo is not None:
        view.trust("each replayed request's send offset and prompt (the trace its cell names)")
        load["replay"] = [replay_again(view, c, s, slo) for c in load["replay"]]
    if load and load.get("sessions") and slo is not None:
        load["sessions"] = sessions_again(view, Sessions.model_validate(load["sessions"]), slo)
    _complete(view, matrix + kinds, load or {})
    for row in matrix + kinds:
        row["run_records"] = public_runs(row.pop("_runs"))
    rows, krows = (
        [MatrixRow.model_validate(r) for r in matrix],
        list(map(KindRow.model_validate, kinds)),
    )
    window = (sealed.get("engine") or {}).get("context_per_request")
    if window is None and view.candidate is not None:
        window = view.candidate.identity.context_length
    data: dict[str, Any] = {
        **sealed,
        "lengths": _lengths(sealed, s, window),
        "matrix": rows,
        "not_run": _not_run(sat, s),
        "saturation": sat,
        "kinds": krows,
        "degenerate": degenerate_answers([*rows, *krows]),
        "answers": judged_cells(rows, krows, Load.model_validate(load or {})),
        "expected": [r.model_dump(mode="json") for r in s.expected],
        "comparison": _comparison(view, rows),
        "warmups": _warmups(view, sealed.get("warmups") or {}),
    }
    if load is not None:
        data["load"] = load
    return Record.model_validate({k: v for k, v in data.items() if k in sealed})


def _comparison(view: AttemptView, matrix: list[MatrixRow]) -> list[Comparison]:
    if (view.sealed.get("incumbent") or {}).get("status") != "measured":
        return []
    cand = {r.cell: r.run_values.model_dump() for r in matrix if r.lane == "candidate"}
    inc = {r.cell: r.run_values.model_dump() for r in matrix if r.lane == INCUMBENT}
    return compare(cand, inc, seed=int(view.sealed.get("seed") or 0))


def _warmups(view: AttemptView, sealed: dict[str, Any]) -> dict[str, Any]:
    """Each warm-up's completion tokens from its exchange."""
    out = copy.deepcopy(sealed)
    for items in out.values():
        for w in items:
            files = w.get("files") or []
            if not files:
                raise NotKept(f"warm-up {w.get('label')} {w.get('n')}: names no kept exchange")
            ex = view.exchange(_PART.sub("", str(files[0])))
            w["completion_tokens"] = stream_record(ex, files)["completion_tokens"]
    return out
