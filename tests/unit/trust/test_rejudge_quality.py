"""Quality judged again from its kept exchanges: a real run (docs/gpu, llama-server on an H200,
the suite on the candidate at both levels and on the control) decided honestly verifies, with the
sandbox runs of the code tasks named as taken from the record; its `result.json` rewritten so the
failing tasks read pass, re-sealed and signed with the pinned decision key, is refused naming the
gate and the table; a code task's recorded code that its kept answer does not give is refused."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from rejudge_run import all_pass, judged_again, policy, unpack, verified

from qualify.present.record import DecisionRecord

HOUSE = policy("quality")
QUALITY = "quality/attempt-001"


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return unpack(tmp_path_factory.mktemp("published"), "roomy")


def _blocks(record: DecisionRecord) -> bool:
    return any(r.startswith("quality/") for r in record.evaluation.reasons)


def test_the_honest_run_verifies_with_quality_judged_again(published: Path, tmp_path: Path) -> None:
    record, report = judged_again(published, tmp_path, "quality")
    assert _blocks(record), "a 135M model fails every task"
    assert report.ok, report.problems
    notes = "\n".join(report.notes)
    assert f"{QUALITY}: judged again from its exchanges" in notes
    assert "the sandbox runs of the answers' code" in notes
    # The control's preflight over-length request was sized by the check code of the time.
    assert "gate quality/control-preflight-over-length@off (not judged again" in notes
    assert "gate quality/mutable-default@think" not in notes, "its requests match: judged again"


def _task_passed(result: dict[str, Any]) -> None:
    """One task's failing attempts rewritten to pass, its table row and totals left alone."""
    for g in result["gates"]:
        if (g["gate"], g["level"]) == ("recall-build", "off"):
            g["verdict"], g["reasons"] = "pass", []
            for a in g["attempts"]:
                a["verdict"], a["reasons"] = "pass", []
                a["metrics"]["outcome"] = "pass"


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        (all_pass, "gate quality/bullets-risks@off is pass, judged again"),
        (_task_passed, "gate quality/recall-build@off is pass, judged again"),
    ],
)
def test_a_failing_task_rewritten_to_pass_is_refused(
    published: Path, tmp_path: Path, edit: Any, said: str
) -> None:
    _, report = verified(published, tmp_path, HOUSE, QUALITY, edit)
    assert not report.ok
    assert any(said in p and "from the exchanges it kept: fail" in p for p in report.problems), (
        report.problems
    )


def test_a_rewritten_table_is_refused_naming_the_field(published: Path, tmp_path: Path) -> None:
    def passed_row(result: dict[str, Any]) -> None:
        result["data"]["table"][0]["attempts"] = ["pass", "pass", "pass"]

    _, report = verified(published, tmp_path, HOUSE, QUALITY, passed_row)
    assert not report.ok
    assert any("data.table[0].attempts" in p for p in report.problems), report.problems


def test_a_code_task_whose_recorded_code_is_not_its_answers_is_refused(
    published: Path, tmp_path: Path
) -> None:
    """The sandbox run is taken as recorded, so the code it ran must be what the kept answer
    gives: a recorded run paired with other code is refused."""

    def other_code(result: dict[str, Any]) -> None:
        g = next(
            g for g in result["gates"] if (g["gate"], g["level"]) == ("mutable-default", "think")
        )
        a = next(a for a in g["attempts"] if "run" in a["metrics"])
        a["metrics"]["code"] = "def append(x, to=None):\n    return [x]\n"

    _, report = verified(published, tmp_path, HOUSE, QUALITY, other_code)
    assert not report.ok
    assert any("mutable-default@think attempt" in p for p in report.problems), report.problems


def _fresh(tmp_path: Path) -> Any:
    """A run of this build (a mock server that answers every question with the build id):
    its attempt as verify reads it."""
    sys.path.insert(0, str(Path(__file__).parents[1] / "quality"))
    from test_quality_stage import run_stage, stage_context

    from qualify.evidence.kept import AttemptView

    ctx, lanes = stage_context(tmp_path / "fresh")
    result = run_stage(ctx)
    run, where = ctx.run.path, ctx.attempt.path
    files = {p.relative_to(run).as_posix(): "" for p in where.iterdir()}
    control = lanes.loaded["control"].candidate
    return AttemptView(run, QUALITY, files, result, ctx.candidate, control)


def test_a_run_of_this_build_is_judged_again_whole(tmp_path: Path) -> None:
    """A run that records this check code has every gate judged again, none taken as recorded;
    a verdict rewritten in it is refused."""
    from qualify.gates.files import default_gates_dir
    from qualify.gates.thresholds import Thresholds
    from qualify.preflight.code import check_code
    from qualify.records import Verdict
    from qualify.trust.rejudge import rejudge_attempt

    view = _fresh(tmp_path)
    assert view.result.data["check_code"] == check_code("quality")
    assert rejudge_attempt(view, default_gates_dir(), Thresholds()) == []
    assert not [t for t in view.trusted if "not judged again" in t], view.trusted
    assert view.judged and len(view.judged) == len(view.result.gates)

    failed = next(g for g in view.result.gates if g.verdict != "pass")
    view.result.gates[view.result.gates.index(failed)] = failed.model_copy(
        update={"verdict": Verdict.PASS}
    )
    problems = rejudge_attempt(view, default_gates_dir(), Thresholds())
    assert any(f"gate {failed.key} is pass, judged again" in p for p in problems), problems
