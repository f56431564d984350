"""The A/B judged again from its kept exchanges: a real run (docs/gpu, llama-server on an H200)
decided honestly verifies; its `result.json` rewritten to pass, re-sealed and signed with the
pinned decision key is refused, naming the gate and the figure."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from rejudge_run import all_pass, drop, judged_again, policy, unpack, verified

from qualify.present.record import DecisionRecord

HOUSE = policy("ab")
AB = "ab/attempt-001"


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return unpack(tmp_path_factory.mktemp("published"))


def _ab_blocks(record: DecisionRecord) -> bool:
    return any(r.startswith("ab/") for r in record.evaluation.reasons)


def test_the_honest_run_verifies_with_the_ab_judged_again(published: Path, tmp_path: Path) -> None:
    record, report = judged_again(published, tmp_path, "ab")
    assert _ab_blocks(record), "the real A/B fails spec-speedup and fidelity"
    assert report.ok, report.problems
    assert any(n.startswith(f"{AB}: judged again from its exchanges") for n in report.notes)


def test_an_ab_result_rewritten_to_pass_is_refused(published: Path, tmp_path: Path) -> None:
    record, report = judged_again(published, tmp_path, "ab", all_pass)
    assert not _ab_blocks(record), "the decision alone takes the rewritten A/B as passed"
    assert not report.ok
    assert any("gate ab/spec-speedup is pass, judged again" in p for p in report.problems), (
        report.problems
    )


def _faster(result: dict[str, Any]) -> None:
    """The candidate's decode figure doubled wherever the document shows it."""
    data = result["data"]
    data["lanes"]["candidate"]["figure"]["decode_tok_s"] *= 2
    row = next(m for m in data["metrics"] if m["metric"] == "decode_tok_s")
    row["candidate"] *= 2


def test_a_speed_figure_rewritten_is_refused_naming_the_field(
    published: Path, tmp_path: Path
) -> None:
    _, report = verified(published, tmp_path, HOUSE, AB, _faster)
    assert not report.ok
    assert any("data.lanes.candidate.figure.decode_tok_s is" in p for p in report.problems)


def test_an_ab_whose_exchange_was_removed_is_refused(published: Path, tmp_path: Path) -> None:
    """Dropping the slowest candidate request (and sealing again) leaves the run short of it."""

    def dropped(run: Path) -> None:
        drop(run, AB, "0003-candidate-run1-summarise-harbour.json")

    _, report = verified(published, tmp_path, HOUSE, change=dropped)
    assert not report.ok
    assert any("cannot be judged again from the exchanges it kept" in p for p in report.problems)


def test_a_gate_left_out_of_the_result_is_named(published: Path, tmp_path: Path) -> None:
    """The run does not record which gate files it judged with, so a gate missing from its
    result (left out, or newer than the run) is named in the notes with its verdict now."""

    def drop_failing(result: dict[str, Any]) -> None:
        result["gates"] = [g for g in result["gates"] if g["gate"] != "spec-speedup"]

    _, report = verified(published, tmp_path, HOUSE, AB, drop_failing)
    assert any(
        "gate ab/spec-speedup is not in the sealed result (judged now: fail" in n
        for n in report.notes
    )
