"""`context-acceptance-depth`: draft acceptance per rung against the shallowest rung's, fed a
rung whose acceptance collapses at depth (fails), a steady ladder (passes), an engine that
drafts nothing ("no speculation", skipped, never a pass) and a record made before (skipped)."""

from __future__ import annotations

from typing import Any

from qualify.context.judges import NoParams, acceptance_depth
from qualify.context.record import Record
from qualify.gates.thresholds import Thresholds
from qualify.records import Verdict

T = Thresholds()


def data(rates: dict[int, float | None], drafts: int = 100) -> Record:
    targets, rows = [], []
    for target, rate in rates.items():
        targets.append({"target": target, "planned_tokens": target, "window": 65536})
        acc: dict[str, Any] = {"drafts": 0, "draft_tokens": 0, "accepted": 0}
        if rate is not None:
            acc = {
                "drafts": drafts,
                "draft_tokens": 4 * drafts,
                "accepted": round(rate * 4 * drafts),
            }
        for pass_ in ("cold", "warm"):
            rows.append(
                {"target": target, "pass": pass_, "content": "prose", "concurrency": 1}
                | {"planned_tokens": target, "verdict": "pass", "acceptance": acc}
            )
    return Record.model_validate({"targets": targets, "rows": rows})


def test_acceptance_that_collapses_at_depth_fails_its_rung() -> None:
    got = acceptance_depth(data({1024: 0.6, 8192: 0.55, 32768: 0.19}), NoParams(), T)
    verdicts = {j.part: j.verdict for j in got}
    assert verdicts == {"8192": Verdict.PASS, "32768": Verdict.FAIL}
    fail = next(j for j in got if j.part == "32768")
    assert "32% of it, under the floor 50%" in fail.reasons[0]
    assert fail.metrics["shallowest"] == 1024


def test_no_speculation_and_a_record_made_before_are_skipped_never_a_pass() -> None:
    (j,) = acceptance_depth(data({1024: None, 8192: None}), NoParams(), T)
    assert j.verdict is Verdict.SKIPPED and j.reasons[0].startswith("no speculation")
    old = Record.model_validate({"targets": [{"target": 1024, "planned_tokens": 1024}]})
    (j,) = acceptance_depth(old, NoParams(), T)
    assert j.verdict is Verdict.SKIPPED and j.reasons == ["acceptance per rung not measured"]


def test_a_deep_rung_that_drafted_nothing_is_inconclusive() -> None:
    (j,) = acceptance_depth(data({1024: 0.6, 8192: None}), NoParams(), T)
    assert j.verdict is Verdict.INCONCLUSIVE and j.part == "8192"
    (j,) = acceptance_depth(data({1024: 0.6}), NoParams(), T)
    assert j.verdict is Verdict.INCONCLUSIVE


def test_the_section_and_diff_show_acceptance_per_rung_only_where_measured() -> None:
    from qualify.context.section import acceptance_line, diff_cells

    rec = data({1024: 0.6, 32768: 0.19})
    assert acceptance_line(rec) == (
        "Draft acceptance per rung (server counters, accepted of drafted tokens): "
        "1,024: 0.60, 32,768: 0.19."
    )
    assert acceptance_line(data({1024: None})) == (
        "Draft acceptance per rung: no speculation (no cell drafted a token)."
    )
    assert acceptance_line(Record()) is None
    figures = {c.cell: c.measures["acceptance"].figure for c in diff_cells(rec)}
    assert figures["32768 cold prose c=1"] == 0.19
