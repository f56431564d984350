"""The A/B's judged data rebuilt from the exchanges an attempt kept (`verify` judges it again).

Every timed request is measured again from its kept exchange as the run measured it, and all
the record derives from requests is computed again with the stage's own functions. The
settings, prompt set, lane recipes and number of runs must be the signed copies', and every
run of each lane must hold one request per prompt.

Not kept raw, so taken from the sealed record (and said): each run's idle checks, the
speculative-decoding counter deltas read from `/metrics` around it (`acceptance`), a server's
histogram window (vLLM), the run's wall time (checked to be no shorter than its slowest
request), and each lane's KV figures.
"""

from __future__ import annotations

from qualify.ab import lossless, table
from qualify.ab.acceptance import response_drafts
from qualify.ab.drive import WINDOW, request_record, summary
from qualify.ab.prompts import ABPrompt, load_prompts, shipped_path
from qualify.ab.record import LANES, Lane, LaneRuns, MetricRow, Record, Run
from qualify.ab.stats import bootstrap_delta_ci, within_noise
from qualify.evidence.kept import AttemptView, NotKept
from qualify.httpclient.chat import from_stream


def _run(
    view: AttemptView,
    lane: str,
    r: Run,
    prompts: dict[str, ABPrompt],
    answers: lossless.Answers,
) -> Run:
    ids = [q.prompt for q in r.requests]
    if sorted(ids) != sorted(prompts):
        raise NotKept(
            f"{lane} run {r.run}: its requests are prompts {ids}, the A/B's set is "
            f"{sorted(prompts)}"
        )
    records, outcomes = [], []
    for q in r.requests:
        ex = view.exchange(q.file)
        o = answers[(lane, r.run, q.prompt)] = from_stream(ex)
        again = request_record(prompts[q.prompt], ex, o, q.file)
        if again.server_source is None and q.server_source is not None:
            view.trust("a server's histogram window (its per-request figures)")
            for k in WINDOW:
                setattr(again, k, getattr(q, k))
        records.append(again)
        outcomes.append(o)
    wall = r.wall_s if "wall_s" in r.model_fields_set else None
    slowest = max((q.e2e_s or 0.0 for q in records), default=0.0)
    if wall is None or wall < slowest:
        raise NotKept(f"{lane} run {r.run}: wall_s {wall} is shorter than its slowest request")
    view.trust("each run's wall time, idle checks and /metrics counter deltas")
    if r.gpu is not None and r.gpu.model_dump():
        view.trust("each run's per-card lowest free memory and mean power (the sampler's)")
    update = {"per_response_drafts": response_drafts(outcomes), "requests": records}
    return summary(r, records, float(wall)).model_copy(update=update)


def _rows(
    view: AttemptView, sealed: Record, runs: LaneRuns, resamples: int, seed: int
) -> list[MetricRow]:
    """The A/B table computed again, in the sealed record's form: a row of the earlier form (no
    `paired`) takes the interval of the delta of the lanes' run-level figures, resampling runs."""
    # intervals enumerated whole only where the record was made so (`paired.exact` written)
    exact = all(
        m.paired is not None and "exact" in m.paired.model_fields_set for m in sealed.metrics
    )
    rows = table.metric_rows(runs["candidate"], runs["control"], resamples, seed, exact)
    if all("paired" in m.model_fields_set for m in sealed.metrics):
        return rows
    view.trust("the A/B table's earlier form (run-level intervals, no paired statistic)")
    for i, row in enumerate(rows):
        a = table.run_values(runs["candidate"], row.metric)
        b = table.run_values(runs["control"], row.metric)
        ci = bootstrap_delta_ci(a, b, resamples, seed + i)
        earlier = {"ci95": list(ci) if ci is not None else None, "within_noise": within_noise(ci)}
        rows[i] = MetricRow.model_validate(row.model_dump(exclude={"paired"}) | earlier)
    return rows


def _prompts(view: AttemptView, sealed: Record) -> dict[str, ABPrompt]:
    """The prompt set the A/B recorded: the shipped one (checked), else the candidate's own file,
    which the run does not keep (taken as recorded)."""
    recorded = [(p.id, p.kind) for p in sealed.prompts]
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
    sealed = Record.model_validate(view.sealed)
    if view.candidate is None:
        raise NotKept("no signed candidate copy in the run")
    s = view.candidate.stages.ab
    if not sealed.lanes:
        if view.control is not None:
            raise NotKept("the run had a control, the A/B kept no lanes")
        return sealed
    if view.sealed.get("settings") != s.model_dump(mode="json"):
        raise NotKept("its settings are not the signed candidate copy's stages.ab")
    prompts = _prompts(view, sealed)
    if sealed.order != [lane for _ in range(s.runs) for lane in LANES]:
        raise NotKept(f"its order is not the lanes in turn, {s.runs} runs each")
    answers: lossless.Answers = {}
    runs: LaneRuns = {
        lane: [
            _run(view, lane, r, prompts, answers) for r in (sealed.lanes.get(lane) or Lane()).runs
        ]
        for lane in LANES
    }
    lanes: dict[str, Lane] = {}
    for lane in LANES:
        recipe = view.candidate if lane == "candidate" else view.control
        if recipe is None:
            raise NotKept(f"the {lane} lane: no signed copy of its recipe in the run")
        view.trust("each lane's KV figures")
        lanes[lane] = table.lane_block(sealed.lanes.get(lane) or Lane(), recipe, runs[lane])
    update: dict[str, object] = {
        "runs": s.runs,
        "lanes": lanes,
        "metrics": _rows(view, sealed, runs, s.bootstrap_resamples, s.seed or 0),
        **table.over_lanes(runs, lanes, s.concurrency),
    }
    if "lossless" in sealed.model_fields_set:  # a record of an earlier build has none
        asked = sealed.lossless is not None and "repeats" in sealed.lossless.model_fields_set
        update["lossless"] = lossless.compare(answers, runs, s.temperature, asked)
    return sealed.model_copy(update=update)
