"""Speculative acceptance over the soak's time: the draft-counter series the watcher keeps, the
figures per third it gives (`qualify.capacity.specdrift`), and `capacity-soak-acceptance` fed a
planted series that drifts (fails), a steady one (passes), an engine that drafts nothing ("no
speculation", skipped, never a pass), thin thirds and a restart (inconclusive)."""

from __future__ import annotations

from typing import Any

import pytest

from qualify.ab.acceptance import SGLANG_WIDTH, SpecCounters
from qualify.capacity import traffic_judges
from qualify.capacity.record import Record
from qualify.capacity.specdrift import acceptance_thirds, spec_point
from qualify.gates.thresholds import Thresholds
from qualify.records import Verdict

T = Thresholds()
P = traffic_judges.NoParams()


def series(rates: list[float], drafts_per_poll: int = 40, width: int = 4) -> list[list[Any]]:
    """A planted counter series: one scrape a second, each poll's drafts accepting `rate` of
    their draft tokens."""
    out: list[list[Any]] = [[0.0, 100.0, 400.0, 150.0]]
    for i, rate in enumerate(rates, start=1):
        d, tok, acc = out[-1][1:]
        step = drafts_per_poll * width
        out.append([float(i), d + drafts_per_poll, tok + step, acc + round(rate * step)])
    return out


def judged(s: list[list[Any]] | None, **soak: Any) -> Any:
    body: dict[str, Any] = {"rate_rps": 1.0, "completed": 30, **soak}
    if s is not None:
        body |= {"acceptance_series": s, "acceptance_drift": acceptance_thirds(s).model_dump()}
    (j,) = traffic_judges.soak_acceptance(Record.model_validate({"load": {"soak": body}}), P, T)
    return j


def test_a_planted_series_that_drifts_fails() -> None:
    drifting = series([0.7] * 10 + [0.5] * 10 + [0.3] * 10)
    got = acceptance_thirds(drifting)
    assert [t.rate for t in got.thirds] == pytest.approx([0.7, 0.5, 0.3])
    assert got.rate_drift_pct == pytest.approx(-57.1, abs=0.1)
    assert got.thirds[0].mean_length == pytest.approx(1 + 0.7 * 4)
    j = judged(drifting)
    assert j.verdict is Verdict.FAIL
    assert "the acceptance rate fell 57%" in j.reasons[0]
    assert "the mean accepted length fell" in j.reasons[1]


def test_a_steady_series_passes_with_its_thirds() -> None:
    j = judged(series([0.6] * 30))
    assert j.verdict is Verdict.PASS, j.reasons
    assert j.reasons[0].startswith("acceptance per third: 0.6 (3.4 tokens per draft")


def test_a_fall_within_the_bound_passes() -> None:
    assert judged(series([0.6] * 10 + [0.58] * 10 + [0.55] * 10)).verdict is Verdict.PASS


def test_no_speculation_is_skipped_never_a_pass() -> None:
    j = judged([])
    assert j.verdict is Verdict.SKIPPED and j.reasons[0].startswith("no speculation")
    idle = [[float(i), 0.0, 0.0, 0.0] for i in range(10)]
    j = judged(idle)
    assert j.verdict is Verdict.SKIPPED and "no drafts over the soak" in j.reasons[0]


def test_thin_thirds_are_inconclusive() -> None:
    j = judged(series([0.7] * 3 + [0.1] * 3, drafts_per_poll=5))
    assert j.verdict is Verdict.INCONCLUSIVE
    assert "thresholds.soak_min_third_drafts" in j.reasons[0]


def test_a_counter_that_goes_down_is_inconclusive() -> None:
    s = series([0.6] * 30)
    s[20][1:] = [1.0, 4.0, 2.0]
    j = judged(s)
    assert j.verdict is Verdict.INCONCLUSIVE and "restart" in j.reasons[0]


def test_a_record_without_the_series_is_not_measured_and_no_soak_is_skipped() -> None:
    assert judged(None).reasons == ["acceptance over the soak not measured"]
    (j,) = traffic_judges.soak_acceptance(Record.model_validate({}), P, T)
    assert j.verdict is Verdict.SKIPPED


def test_spec_point_reads_counters_and_sglangs_verify_calls() -> None:
    assert spec_point(SpecCounters(drafts=10, draft_tokens=40, accepted=25)) == (10, 40, 25)
    sg = SpecCounters(verify_calls=10, generated=35, gauges={SGLANG_WIDTH: 4.0})
    assert spec_point(sg) == (10, 30, 25)
    assert spec_point(SpecCounters(verify_calls=10, generated=35)) == (10, None, 25)
    assert spec_point(SpecCounters()) is None


def _soak_record(s: list[list[Any]] | None) -> Record:
    body: dict[str, Any] = {"rate_rps": 1.0, "duration_s": 30, "completed": 30, "planned": 30}
    if s is not None:
        body |= {"acceptance_series": s, "acceptance_drift": acceptance_thirds(s).model_dump()}
    return Record.model_validate({"load": {"soak": body}})


def test_the_soak_sentence_and_diff_cells_show_acceptance_per_third() -> None:
    from qualify.capacity.section import diff_cells, soak_text

    rec = _soak_record(series([0.7] * 10 + [0.5] * 10 + [0.3] * 10))
    assert rec.load.soak is not None
    text = soak_text(rec.load.soak, "fail")
    assert text.endswith(
        "; acceptance per third 0.70 -> 0.50 -> 0.30 (-57%), mean accepted length 3.8 -> 3.0 -> 2.2"
    )
    cells = {c.cell: c.measures["acceptance"].figure for c in diff_cells(rec)}
    assert cells == pytest.approx({"soak first third": 0.7, "soak last third": 0.3})
    plain = _soak_record([])
    assert plain.load.soak is not None
    assert soak_text(plain.load.soak, "pass").endswith(
        "; acceptance: no speculation: the engine reported no draft counters"
    )
    old = _soak_record(None)
    assert old.load.soak is not None and "acceptance" not in soak_text(old.load.soak, "pass")
    assert diff_cells(old) == []
