"""The A/B's judged data rebuilt from the exchanges an attempt kept (`verify` judges it again).

Every timed request of every run is read back from its kept exchange (the SSE events with their
arrival times, the usage and the server's own timings) and measured again exactly as the run
measured it (`qualify.ab.drive.request_record`); the run summaries, lane figures, spreads, the
paired table with its bootstrap intervals, the excluded and degenerate lists and the fidelity
summary are computed again from those requests with the stage's own functions, and the paired
answers compared token by token (`qualify.ab.lossless`). The settings,
the prompt set, the lane recipes and the number of runs must be what the signed candidate and
control copies say, and every run of each lane must hold one request per prompt.

Not kept raw, so taken from the sealed record (and said): each run's idle checks, the
speculative-decoding counter deltas read from `/metrics` around it (`acceptance`), a server's
histogram window (vLLM), the run's wall time (checked to be no shorter than its slowest
request), and each lane's KV figures.
"""

from __future__ import annotations

import copy

from qualify.ab import lossless, table
from qualify.ab.acceptance import response_drafts
from qualify.ab.drive import request_record, summary
from qualify.ab.forms import (
    LaneForm,
    LaneRuns,
    MetricRowForm,
    RecordForm,
    RequestForm,
    RunForm,
    Runs,
    record_form,
    window_of,
)
from qualify.ab.prompts import ABPrompt, load_prompts, shipped_path
from qualify.ab.record import LANES, Record
from qualify.ab.stats import bootstrap_delta_ci, within_noise
from qualify.evidence.kept import AttemptView, NotKept
from qualify.httpclient.chat import ChatOutcome, from_stream


def _request(
    view: AttemptView, q: RequestForm, prompts: dict[str, ABPrompt]
) -> tuple[RequestForm, ChatOutcome]:
    prompt = prompts.get(str(q.get("prompt")))
    if prompt is None:
        raise NotKept(f"request of prompt {q.get('prompt')!r}: not a prompt of the A/B's set")
    name = str(q.get("file") or "")
    ex = view.exchange(name)
    o = from_stream(ex)
    again = request_record(prompt, ex, o, name)
    if again["server_source"] is None and q.get("server_source") is not None:
        view.trust("a server's histogram window (its per-request figures)")
        again.update(window_of(q))
    return again, o


def _run(
    view: AttemptView,
    lane: str,
    r: RunForm,
    prompts: dict[str, ABPrompt],
    answers: lossless.Answers,
) -> RunForm:
    requests = r.get("requests") or []
    ids = [q.get("prompt") for q in requests]
    if sorted(map(str, ids)) != sorted(prompts):
        raise NotKept(
            f"{lane} run {r.get('run')}: its requests are prompts {ids}, the A/B's set is "
            f"{sorted(prompts)}"
        )
    records, outcomes = [], []
    for q in requests:
        rec, o = _request(view, q, prompts)
        records.append(rec)
        outcomes.append(o)
        answers[(lane, int(r.get("run") or 0), str(q.get("prompt")))] = o
    wall = r.get("wall_s")
    slowest = max((q["e2e_s"] or 0.0 for q in records), default=0.0)
    if not isinstance(wall, int | float) or wall < slowest:
        why = f"wall_s {wall} is shorter than its slowest request"
        raise NotKept(f"{lane} run {r.get('run')}: {why}")
    view.trust("each run's wall time, idle checks and /metrics counter deltas")
    if r.get("gpu"):
        view.trust("each run's per-card lowest free memory and mean power (the sampler's)")
    return {
        **r,
        **summary(records, float(wall)),
        "per_response_drafts": response_drafts(outcomes),
        "requests": records,
    }


def _lane(view: AttemptView, lane: str, block: LaneForm, runs: Runs) -> LaneForm:
    recipe = view.candidate if lane == "candidate" else view.control
    if recipe is None:
        raise NotKept(f"the {lane} lane: no signed copy of its recipe in the run")
    view.trust("each lane's KV figures")
    return block | table.lane_block(recipe, runs)


def _rows(
    view: AttemptView,
    sealed: RecordForm,
    runs: LaneRuns,
    resamples: int,
    seed: int,
) -> list[MetricRowForm]:
    """The A/B table computed again. A row of the earlier form, with no paired statistic
    (`paired`), is computed as that form defined it: the interval of the delta of the lanes'
    run-level figures, resampling runs (`bootstrap_delta_ci`); which form a row takes is the
    sealed record's (said in the notes: the figures are still the exchanges' own)."""
    rows_in = [m for m in sealed.get("metrics") or [] if isinstance(m, dict)]
    # intervals enumerated whole only where the record was made so (`paired.exact` written)
    exact = all("exact" in (m.get("paired") or {}) for m in rows_in)
    rows = table.metric_rows(runs["candidate"], runs["control"], resamples, seed, exact)
    old = [m for m in rows_in if "paired" not in m]
    if not old:
        return rows
    view.trust("the A/B table's earlier form (run-level intervals, no paired statistic)")
    for i, row in enumerate(rows):
        a = table.run_values(runs["candidate"], row["metric"])
        b = table.run_values(runs["control"], row["metric"])
        ci = bootstrap_delta_ci(a, b, resamples, seed + i)
        row.pop("paired")
        row["ci95"] = list(ci) if ci is not None else None
        row["within_noise"] = within_noise(ci)
    return rows


def _prompts(view: AttemptView, sealed: RecordForm) -> dict[str, ABPrompt]:
    """The prompt set the A/B recorded: the shipped one when the candidate names none (checked
    against it), else the candidate's own file, which the run does not keep (taken as recorded)."""
    recorded = [(str(p.get("id")), str(p.get("kind"))) for p in sealed.get("prompts") or []]
    assert view.candidate is not None
    if view.candidate.stages.ab.prompts is None:
        shipped = load_prompts(shipped_path())
        if recorded != [(p.id, p.kind) for p in shipped.prompts]:
            raise NotKept("its prompts are not the shipped prompt set")
        return {p.id: p for p in shipped.prompts}
    view.trust("the prompt set of the candidate's own prompt file")
    if not recorded:
        raise NotKept("no prompt set recorded")
    return {i: ABPrompt(id=i, kind=k, text="-") for i, k in recorded}


def rebuild(view: AttemptView) -> Record:
    """The A/B's record as its kept exchanges give it (see the module docstring)."""
    sealed = record_form(copy.deepcopy(view.sealed))
    if view.candidate is None:
        raise NotKept("no signed candidate copy in the run")
    s = view.candidate.stages.ab
    lanes_in = sealed.get("lanes") or {}
    if not lanes_in:
        if view.control is not None:
            raise NotKept("the run had a control, the A/B kept no lanes")
        return Record.model_validate(sealed)
    if sealed.get("settings") != s.model_dump(mode="json"):
        raise NotKept("its settings are not the signed candidate copy's stages.ab")
    prompts = _prompts(view, sealed)
    if sealed.get("order") != [lane for _ in range(s.runs) for lane in LANES]:
        raise NotKept(f"its order is not the lanes in turn, {s.runs} runs each")
    answers: lossless.Answers = {}
    runs: LaneRuns = {
        lane: [
            _run(view, lane, r, prompts, answers)
            for r in (lanes_in.get(lane) or {}).get("runs") or []
        ]
        for lane in LANES
    }
    lanes: dict[str, LaneForm] = {
        lane: _lane(view, lane, lanes_in.get(lane) or {}, runs[lane]) for lane in LANES
    }
    if "lossless" in sealed:  # a record of an earlier build has none
        asked = sealed["lossless"] or {}
        sealed["lossless"] = lossless.compare(answers, runs, s.temperature, "repeats" in asked)
    return Record.model_validate(
        {
            **sealed,
            "runs": s.runs,
            "lanes": lanes,
            "metrics": _rows(view, sealed, runs, s.bootstrap_resamples, s.seed or 0),
            **table.over_lanes(runs, lanes, s.concurrency),
        }
    )
