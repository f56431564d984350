"""Preflight judged again from its kept exchanges: a real run (docs/gpu, llama-server on an H200)
decided honestly verifies, its gates whose requests this check code sends again judged again and
the others (sent by the earlier check code that made the run) named as taken from the record; its
`result.json` rewritten so a failing gate reads pass, re-sealed and signed with the pinned
decision key, is refused naming the gate; a record that claims this check code is held to it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from rejudge_run import all_pass, judged_again, policy, unpack, verified

from qualify.preflight.code import check_code
from qualify.present.record import DecisionRecord
from qualify.records import GateResult, Verdict

HOUSE = policy("preflight")
PREFLIGHT = "preflight/attempt-001"


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return unpack(tmp_path_factory.mktemp("published"), "tight")


def _blocks(record: DecisionRecord) -> bool:
    return any(r.startswith("preflight/") for r in record.evaluation.reasons)


def _notes(report: Any) -> str:
    return "\n".join(report.notes)


def test_the_honest_run_verifies_with_preflight_judged_again(
    published: Path, tmp_path: Path
) -> None:
    record, report = judged_again(published, tmp_path, "preflight")
    assert _blocks(record), "the real preflight fails tool calls at off"
    assert report.ok, report.problems
    notes = _notes(report)
    assert f"{PREFLIGHT}: judged again from its exchanges" in notes
    # Sent by the check code of the time (no reasoning allowance yet): named, not judged again.
    assert "gate preflight/garble@think (not judged again" in notes
    assert "gate preflight/streaming-tools@off" not in notes, "its requests match: judged again"
    assert f"{PREFLIGHT}: the record names no check_code" in notes


def _gate(name: str, level: str) -> Any:
    def edit(result: dict[str, Any]) -> None:
        for g in result["gates"]:
            if (g["gate"], g["level"]) == (name, level):
                g["verdict"], g["reasons"] = "pass", []
                for a in g["attempts"]:
                    a["verdict"], a["reasons"] = "pass", []
        result["reasons"] = [r for r in result["reasons"] if f"/{name}@{level}" not in r]

    return edit


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        (all_pass, "gate preflight/streaming-tools@off is pass, judged again"),
        (_gate("typed-tools", "off"), "gate preflight/typed-tools@off is pass, judged again"),
    ],
)
def test_a_failing_gate_rewritten_to_pass_is_refused(
    published: Path, tmp_path: Path, edit: Any, said: str
) -> None:
    _, report = verified(published, tmp_path, HOUSE, PREFLIGHT, edit)
    assert not report.ok
    assert any(said in p and "from the exchanges it kept: fail" in p for p in report.problems), (
        report.problems
    )


def test_a_gate_lent_another_gates_exchange_is_refused(published: Path, tmp_path: Path) -> None:
    """The failing tool call at off pointed at the passing one at think (whose request differs,
    so it would be taken as recorded): the files an attempt names must be its own."""

    def lend(result: dict[str, Any]) -> None:
        _gate("streaming-tools", "off")(result)
        think = next(
            g for g in result["gates"] if (g["gate"], g["level"]) == ("streaming-tools", "think")
        )
        off = next(
            g for g in result["gates"] if (g["gate"], g["level"]) == ("streaming-tools", "off")
        )
        off["attempts"][0]["files"] = think["attempts"][0]["files"]

    _, report = verified(published, tmp_path, HOUSE, PREFLIGHT, lend)
    assert not report.ok
    assert any("streaming-tools@off attempt 1 names" in p for p in report.problems), report.problems


def test_a_record_of_this_check_code_is_held_to_every_request(
    published: Path, tmp_path: Path
) -> None:
    """Claiming the check code this installation has makes every gate strict: the think gates'
    requests (sent without the reasoning allowance) then cannot be the ones it sends."""

    def claim(result: dict[str, Any]) -> None:
        result["data"]["check_code"] = check_code("preflight")

    _, report = verified(published, tmp_path, HOUSE, PREFLIGHT, claim)
    assert not report.ok
    assert any(
        "cannot be judged again from the exchanges it kept: gate preflight/over-length@off" in p
        and "the check sends another request" in p
        for p in report.problems
    ), report.problems


def _left_out(also_gate_files: bool) -> Any:
    def edit(result: dict[str, Any]) -> None:
        result["gates"] = [g for g in result["gates"] if g["gate"] != "typed-tools"]
        result["reasons"] = [r for r in result["reasons"] if "/typed-tools@" not in r]
        if also_gate_files:
            del result["data"]["gate_files"]["typed-tools"]

    return edit


@pytest.mark.parametrize(
    ("also_gate_files", "said"),
    [
        (False, "gates its record says ran have no result: ['typed-tools@off'"),
        (True, "kept exchanges no gate of the record names"),
    ],
)
def test_a_failing_gate_left_out_of_the_result_is_refused(
    published: Path, tmp_path: Path, also_gate_files: bool, said: str
) -> None:
    """A gate dropped from the result leaves a gate file that ran without a result, or (its
    gate file dropped too) exchanges that no gate names."""
    _, report = verified(published, tmp_path, HOUSE, PREFLIGHT, _left_out(also_gate_files))
    assert not report.ok
    assert any(said in p for p in report.problems), report.problems


def test_the_stages_judged_again_are_read_from_the_registry() -> None:
    """Every registered stage with a `rebuild` module, in the registry's order (identity is
    judged in verify itself); a stage with none is not."""
    from qualify.registry import StageSpec, register_stage, stage_names, unregister_stage
    from qualify.trust.rejudge import rejudged

    got = rejudged()
    assert {"preflight", "quality", "context", "ab"} <= set(got)
    assert "identity" not in got
    assert list(got) == [n for n in stage_names() if n in got]
    register_stage(StageSpec("norebuild"))
    try:
        assert "norebuild" in stage_names() and "norebuild" not in rejudged()
    finally:
        unregister_stage("norebuild")


def test_a_run_of_this_build_is_judged_again_whole(tmp_path: Path) -> None:
    """A preflight run of this build (a mock server that answers every request with one chat
    answer) records this check code; every gate is judged again, none taken as recorded, and a
    verdict rewritten in it is refused."""
    import asyncio
    import sys

    sys.path.insert(0, str(Path(__file__).parents[1] / "quality"))
    from test_quality_stage import stage_context

    from qualify.evidence.kept import AttemptView
    from qualify.gates.files import default_gates_dir
    from qualify.gates.thresholds import Thresholds
    from qualify.preflight.stage import preflight
    from qualify.records import Verdict
    from qualify.stage import StageContext
    from qualify.trust.rejudge import rejudge_attempt

    qctx, lanes = stage_context(tmp_path / "fresh", control=False)
    ctx = StageContext(
        "preflight",
        qctx.loaded,
        qctx.run,
        qctx.run.new_attempt("preflight"),
        lanes,
        qctx.progress,
    )  # type: ignore[arg-type]
    result = asyncio.run(preflight(ctx))
    run = ctx.run.path
    files = {p.relative_to(run).as_posix(): "" for p in ctx.attempt.path.iterdir()}
    view = AttemptView(run, PREFLIGHT, files, result, ctx.candidate)
    assert result.data["check_code"] == check_code("preflight")
    assert rejudge_attempt(view, default_gates_dir(), Thresholds()) == []
    assert view.trusted == [], view.trusted
    assert view.judged is not None and len(view.judged) == len(result.gates)

    failed = next(g for g in result.gates if g.verdict != "pass")
    result.gates[result.gates.index(failed)] = failed.model_copy(update={"verdict": Verdict.PASS})
    problems = rejudge_attempt(view, default_gates_dir(), Thresholds())
    assert any(f"gate {failed.key} is pass, judged again" in p for p in problems), problems


def _gate_with(metrics: dict[str, object], reasons: list[str] | None = None) -> GateResult:
    from qualify.records import AttemptRecord

    attempt = AttemptRecord(number=1, verdict=Verdict.PASS, reasons=reasons or [], metrics=metrics)
    return GateResult(
        gate="streaming-tools", stage="preflight", verdict=Verdict.PASS, attempts=[attempt]
    )


def test_a_time_again_from_microsecond_arrivals_is_the_same_figure() -> None:
    """A real demo run's streaming gate gave its TTFT again 0.4 us apart (arrival times are kept
    to the microsecond): the same figure. Beyond the tolerance, or a figure the sealed attempt
    lacks, is a different run of the check."""
    from qualify.preflight.rebuild import _same_attempts
    from qualify.trust.replay import Unmatched

    sealed = _gate_with({"ttft_s": 0.123456789, "finish_reason": "tool_calls", "wall_s": 3.0})
    _same_attempts(sealed, _gate_with({"ttft_s": 0.1234572, "finish_reason": "tool_calls"}))
    with pytest.raises(Unmatched, match="figures"):
        _same_attempts(sealed, _gate_with({"ttft_s": 0.2, "finish_reason": "tool_calls"}))
    with pytest.raises(Unmatched, match="figures"):
        _same_attempts(sealed, _gate_with({"ttft_s": 0.123456789, "finish_reason": "stop"}))
    with pytest.raises(Unmatched, match="extra"):
        _same_attempts(
            sealed, _gate_with({"ttft_s": 0.123456789, "finish_reason": "tool_calls", "extra": 1})
        )
    with pytest.raises(Unmatched, match="reasons"):
        _same_attempts(sealed, _gate_with(dict(sealed.attempts[0].metrics), ["other"]))


def _house_accepting(codes: list[str]) -> str:
    """The preflight house, listing the preflight check codes it accepts."""
    listed = ", ".join(f'"{c}"' for c in codes)
    return f"{HOUSE}\n[check_codes]\npreflight = [{listed}]\n"


def test_a_house_that_lists_its_check_codes_refuses_a_record_of_another(
    published: Path, tmp_path: Path
) -> None:
    """The published run names no check code (earlier code): under a house that accepts only
    this installation's, verify refuses it instead of taking its unmatched gates as recorded;
    under the default house (no list) the same run verifies (test above)."""
    _, report = verified(published, tmp_path, _house_accepting([check_code("preflight")]))
    assert not report.ok
    assert any(
        "its check_code None is neither this installation's" in p
        and "nor one the house accepts for preflight" in p
        for p in report.problems
    ), report.problems


def test_a_listed_earlier_check_code_is_taken_as_recorded_and_named(
    published: Path, tmp_path: Path
) -> None:
    """An earlier code the house lists: its record verifies, the gates this code sends other
    requests for taken as recorded and named, as without a list."""
    earlier = "ab" * 32

    def earlier_code(result: dict[str, Any]) -> None:
        result["data"]["check_code"] = earlier

    accepting = _house_accepting([check_code("preflight"), earlier])
    _, report = verified(published, tmp_path, accepting, PREFLIGHT, earlier_code)
    assert report.ok, report.problems
    notes = _notes(report)
    assert f"check_code {earlier[:12]}, this installation's" in notes
    assert "gate preflight/garble@think (not judged again" in notes


def test_house_check_codes_prints_the_table_a_house_pastes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    import tomllib

    from qualify.cli import main

    assert main(["house", "check-codes"]) == 0
    table = tomllib.loads(capsys.readouterr().out)["check_codes"]
    assert table == {s: [check_code(s)] for s in ("preflight", "quality", "capacity")}
