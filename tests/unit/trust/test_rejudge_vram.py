"""The vram stage judged again from the samples the run kept: the published tight run (docs/gpu,
llama-server on an H200 whose free memory fell below the reserve) decided honestly verifies; its
`result.json` rewritten to pass, re-sealed and signed with the pinned decision key, is refused
naming the gate and the field. The rebuild's own guards are tested on the unpacked run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from rejudge_run import all_pass, attempt_view, copy_run, judged_again, policy, unpack, verified

from qualify.evidence.kept import AttemptView, NotKept, differences
from qualify.vram.rebuild import rebuild

HOUSE = policy("vram")
VRAM = "vram/attempt-001"


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return unpack(tmp_path_factory.mktemp("published"), "tight")


def _view(run: Path) -> AttemptView:
    return attempt_view(run, VRAM)


def test_the_honest_run_verifies_with_the_vram_judged_again(
    published: Path, tmp_path: Path
) -> None:
    record, report = judged_again(published, tmp_path, "vram")
    assert any(r.startswith("vram/") for r in record.evaluation.reasons), "the tight run fails"
    assert report.ok, report.problems
    assert any(n.startswith(f"{VRAM}: judged again from its exchanges") for n in report.notes)


def test_the_published_runs_rebuild_to_their_sealed_figures(published: Path) -> None:
    view = _view(published)
    rebuilt = rebuild(view)
    assert differences(view.sealed, rebuilt) == []
    assert rebuilt.cards[0].stages["ab"].min_free_mib == 1239.125
    assert rebuilt.stages == ["identity", "preflight", "context", "ab"]
    assert any("interval and read-cost" in t for t in view.trusted)


def test_a_reserve_rewritten_to_pass_is_refused(published: Path, tmp_path: Path) -> None:
    record, report = judged_again(published, tmp_path, "vram", all_pass)
    assert not any(r.startswith("vram/") for r in record.evaluation.reasons)
    assert not report.ok
    assert any("gate vram/reserve@0 is pass, judged again" in p for p in report.problems), (
        report.problems
    )


def _roomier(result: dict[str, Any]) -> None:
    """Every stage's lowest free memory raised above the reserve, every gate passed."""
    all_pass(result)
    for card in result["data"]["cards"]:
        for figures in card["stages"].values():
            figures["min_free_mib"] = 100_000.0


def test_a_free_memory_figure_rewritten_is_refused_naming_the_field(
    published: Path, tmp_path: Path
) -> None:
    _, report = verified(published, tmp_path, HOUSE, VRAM, _roomier)
    assert not report.ok
    assert any(
        "data.cards[0].stages.identity.min_free_mib is 100000.0" in p for p in report.problems
    ), report.problems


def test_a_telemetry_attempt_left_out_of_the_record_is_refused(published: Path) -> None:
    view = _view(published)
    view.result.data["telemetry"] = []
    assert any(p.startswith("telemetry") for p in differences(view.sealed, rebuild(view)))


def test_a_record_without_its_reserve_cannot_be_judged_again(published: Path) -> None:
    view = _view(published)
    del view.result.data["reserve_gib"]
    with pytest.raises(NotKept, match="no reserve"):
        rebuild(view)


def _later(run: Path, stage: str, n: int, files: dict[str, Any]) -> None:
    d = run / stage / f"attempt-{n:03d}"
    d.mkdir(parents=True)
    for name, body in files.items():
        text = body if isinstance(body, str) else json.dumps(body)
        (d / name).write_text(text)


def test_a_sampler_of_a_later_process_is_not_read(published: Path, tmp_path: Path) -> None:
    """A telemetry attempt whose sampler started after the vram attempt (a later `--resume`)
    is not what the vram attempt judged."""
    run = copy_run(published, tmp_path)
    header = json.loads((run / "telemetry/attempt-001/header.json").read_text())
    header["t0_utc"] = "2099-01-01T00:00:00Z"
    _later(
        run,
        "telemetry",
        2,
        {"header.json": header, "samples.000.jsonl": '[1.0, "ab", "0", 5.0, 1.0, 100.0]\n'},
    )
    view = _view(run)
    assert differences(view.sealed, rebuild(view)) == []


def test_a_stage_first_run_after_the_vram_attempt_is_not_counted(
    published: Path, tmp_path: Path
) -> None:
    run = copy_run(published, tmp_path)
    info = json.loads((run / "run.json").read_text())
    info["stages"].insert(2, "quality")
    (run / "run.json").write_text(json.dumps(info))
    result = json.loads((run / VRAM / "result.json").read_text())
    result.update(stage="quality", started_at="2099-01-01T00:00:00Z", gates=[], data={})
    _later(run, "quality", 1, {"result.json": result})
    view = _view(run)
    assert differences(view.sealed, rebuild(view)) == []
