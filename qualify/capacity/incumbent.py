"""The incumbent: the candidate file the alias table points the candidate's alias at, usable
when it is still there, unchanged since it was qualified, loads, and is not this candidate; and
the comparison with it per cell and metric (docs/capacity.md, "The incumbent")."""

from __future__ import annotations

from pathlib import Path

from qualify.ab.stats import bootstrap_delta_ci, delta_pct
from qualify.candidate import LoadedCandidate, load_candidate, resolve_path
from qualify.capacity.record import Comparison, RunValues
from qualify.errors import BadInput
from qualify.evidence.store import sha256_file
from qualify.httpclient.timing import median
from qualify.trust.repository import TABLE, default_house, read_table

COMPARED = ("aggregate_output_tok_s", "decode_tok_s_p50")


def find_incumbent(
    loaded: LoadedCandidate, house: Path | None = None
) -> tuple[LoadedCandidate | None, dict[str, object]]:
    """The incumbent's candidate and a note saying what was found (always filled); `house` is
    the house repository the run was given."""
    alias = loaded.candidate.alias
    if alias is None:
        return None, {"status": "none", "why": "the candidate names no alias"}
    near = resolve_path(loaded, alias.table)
    table = near if near.is_file() else (house if house is not None else default_house()) / TABLE
    info: dict[str, object] = {"alias": alias.name, "table": str(table)}
    try:
        target = read_table(table).get(alias.name)
    except BadInput as exc:
        return None, {**info, "status": "unusable", "why": f"{exc.headline}: {exc.problems}"}
    if not target:
        return None, {**info, "status": "first", "why": f"alias {alias.name!r} points at nothing"}
    path = Path(str(target.get("candidate_path", "")))
    info.update(candidate=target.get("candidate"), candidate_path=str(path))
    info["decision_sha256"] = target.get("decision_sha256")
    if not path.is_file():
        return None, {**info, "status": "unusable", "why": f"{path} is not a file any more"}
    now, qualified = sha256_file(path), target.get("candidate_sha256")
    if now != qualified:
        why = f"{path} has sha256 {now[:16]}; it was qualified as {str(qualified)[:16]}"
        return None, {**info, "status": "unusable", "why": why}
    if now == loaded.sha256:
        why = f"alias {alias.name!r} already points at this candidate"
        return None, {**info, "status": "same", "why": why}
    try:
        inc = load_candidate(path)
    except BadInput as exc:
        return None, {**info, "status": "unusable", "why": f"{exc.headline}: {exc.problems}"}
    return inc, {**info, "status": "found", "why": ""}


def compare(
    cand: dict[str, RunValues], inc: dict[str, RunValues], seed: int = 0
) -> list[Comparison]:
    """One row per cell both lanes measured (by cell, its `run_values`) and metric: medians,
    delta %, its 95% interval."""
    rows = []
    for key in (k for k in cand if k in inc):
        for metric in COMPARED:
            a, b = getattr(cand[key], metric), getattr(inc[key], metric)
            ma, mb = median(a), median(b)
            ci = bootstrap_delta_ci(a, b, 2000, seed)
            pct_ci = None
            if ci is not None and mb:
                pct_ci = [100.0 * ci[0] / mb, 100.0 * ci[1] / mb]
            rows.append(
                Comparison(
                    cell=key,
                    metric=metric,
                    candidate=ma,
                    incumbent=mb,
                    delta_pct=delta_pct(None if ma is None or mb is None else ma - mb, mb),
                    delta_pct_ci95=pct_ci,
                    runs=[len(a), len(b)],
                )
            )
    return rows
