"""The capacity stage with a measured incumbent, against the real local llama-server.

The alias the candidate names points at a second candidate file (the same recipe under another
name), so the stage launches both servers in turn: the matrix alternates the lanes (ABBA) and is
compared cell by cell, and after the candidate's knee search the incumbent repeats its steps at
the knee and at the first rate over it, with the same requests and the same arrivals
(`qualify.capacity.edge`). The record is then rebuilt from the kept exchanges as `verify` does
and must agree, and a rewritten incumbent step is refused.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from qualify.alias import render_table
from qualify.candidate import load_candidate
from qualify.capacity.edge import PREFIX, edge_steps
from qualify.capacity.rebuild import rebuild
from qualify.capacity.record import Record
from qualify.capacity.section import load as load_section
from qualify.evidence.kept import AttemptView, NotKept, differences
from qualify.evidence.store import sha256_file
from qualify.records import StageResult
from qualify.registry import parse_record

pytestmark = pytest.mark.integration

_RESULT: dict[str, tuple[StageResult, Path, Path]] = {}
# A lean matrix and a short search: 0.5, 1 and 2 req/s of 6 s at 128 tokens, no burst, no soak.
LEAN = {
    '"-c", "8192"': '"-c", "2048"',
    "lengths = [256, 2048]": "lengths = [128]",
    "concurrency = [1, 2]": "concurrency = [1]",
    "runs = 1\nwarmups = 1": "runs = 2\nwarmups = 1",
    'kinds = ["prose", "code", "json", "list"]': "kinds = []",
    "load = { length = 256, start_rps = 0.2, step_s = 12, min_requests = 4, max_steps = 4, "
    "refine = 1, burst = 4, max_total_s = 150 }": "load = { length = 128, start_rps = 0.5, "
    "step_s = 6, min_requests = 4, max_steps = 3, refine = 0, burst = 0, max_total_s = 90 }",
    "soak = { rate_fraction = 0.75 }": "soak = { enabled = false }",
}


@pytest.fixture
def measured(
    candidate_factory: Callable[..., Path], stage_runner: Any
) -> tuple[StageResult, Path, Path]:
    """(the stage's result, its attempt folder, the candidate file): one stage run."""
    if "run" not in _RESULT:
        cand = candidate_factory("incumbent", stages=["capacity"], replace=LEAN)
        inc = cand.parent / "incumbent.toml"
        text = cand.read_text()
        inc.write_text(text.replace(f'name = "{_name(text)}"', 'name = "smollm2-production"'))
        table = {
            "demo-chat": {
                "candidate": "smollm2-production",
                "candidate_path": str(inc),
                "candidate_sha256": sha256_file(inc),
                "decision_sha256": "0" * 64,
            }
        }
        (cand.parent / "aliases.toml").write_text(render_table(table))
        runner = stage_runner(cand)
        result = runner.stage("capacity")
        _RESULT["run"] = (result, runner.run.path / "capacity" / "attempt-001", cand)
    return _RESULT["run"]


def _name(text: str) -> str:
    return next(ln for ln in text.splitlines() if ln.startswith("name = ")).split('"')[1]


def _record(result: StageResult) -> Record:
    record = parse_record("capacity", result.data)
    assert isinstance(record, Record)
    return record


def test_the_incumbent_is_measured_and_compared(measured: tuple[StageResult, Path, Path]) -> None:
    result, _, _ = measured
    record = _record(result)
    assert record.incumbent.status == "measured", record.incumbent.why
    assert {r.cell for r in record.comparison} == {"128-c1"}
    lanes = [r.lane for r in record.matrix]
    assert sorted(lanes) == ["candidate", "incumbent"]
    assert result.data["order"][:4] == [
        "candidate run 1",
        "incumbent run 1",
        "incumbent run 2",
        "candidate run 2",
    ]


def test_the_incumbent_repeats_the_candidates_edge(
    measured: tuple[StageResult, Path, Path],
) -> None:
    """The incumbent ran the knee and the first rate over it (where the search found them), each
    with the candidate's requests at the candidate's planned arrival times."""
    result, attempt, _ = measured
    record = _record(result)
    load = record.load
    assert load.knee is not None and load.incumbent is not None
    assert load.incumbent.status == "measured", load.incumbent.why
    steps = edge_steps(load.cells, load.knee)
    assert steps and steps[0][0] == load.knee.rate_rps
    assert [(c.rate_rps, (c.step or 0) - 1) for c in load.incumbent.cells] == steps
    for inc in load.incumbent.cells:
        cand = next(c for c in load.cells if c.step == inc.step)
        assert inc.cell == f"{PREFIX}{cand.cell}"
        assert inc.requests == cand.requests
        assert [s.planned_s for s in inc.streams] == [s.planned_s for s in cand.streams]
        sent = [s for s in inc.streams if s.files]
        assert sent, "the incumbent answered none of its step"
        for s in sent:
            assert f"-load-{PREFIX}poisson-" in s.files[0]
            assert (attempt / s.files[0]).is_file()
    judged = [
        c for c in record.answers.cells if c.lane == "incumbent" and c.where.startswith(PREFIX)
    ]
    assert len(judged) == len(load.incumbent.cells)


def test_the_decision_shows_both_lanes_at_the_edge(
    measured: tuple[StageResult, Path, Path],
) -> None:
    result, _, _ = measured
    part = load_section(_record(result), [])
    assert part is not None and part["edge"] is not None
    rows = part["edge"]["rows"]
    assert len(rows) == len(_record(result).load.incumbent.cells)  # type: ignore[union-attr]
    for row in rows:
        assert ("held" in row["candidate"]) and ("held" in row["incumbent"])


def _view(result: StageResult, attempt: Path, cand: Path, data: dict[str, Any]) -> AttemptView:
    run = attempt.parent.parent
    files = {p.relative_to(run).as_posix(): "" for p in run.rglob("*") if p.is_file()}
    sealed = result.model_copy(update={"data": data})
    return AttemptView(run, "capacity/attempt-001", files, sealed, load_candidate(cand).candidate)


def test_verify_rebuilds_the_incumbents_steps(measured: tuple[StageResult, Path, Path]) -> None:
    """The record as `verify` derives it again from the kept exchanges agrees with the sealed
    one, the incumbent's steps too; a step's goodput rewritten is a difference, and an incumbent
    step moved to a rate the search did not end at is refused."""
    result, attempt, cand = measured
    data = json.loads(json.dumps(result.data))
    view = _view(result, attempt, cand, data)
    assert differences(view.sealed, rebuild(view)) == []

    data["load"]["incumbent"]["cells"][0]["goodput"] = 0.123
    view = _view(result, attempt, cand, data)
    found = differences(view.sealed, rebuild(view))
    assert any("incumbent.cells[0].goodput" in d for d in found), found

    moved = json.loads(json.dumps(result.data))
    moved["load"]["incumbent"]["cells"][0]["step"] = 7
    with pytest.raises(NotKept, match="edge steps"):
        rebuild(_view(result, attempt, cand, moved))
