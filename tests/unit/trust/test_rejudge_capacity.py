"""The capacity stage judged again from its kept exchanges.

The published roomy run (docs/gpu, llama-server on an H200: the matrix and per-kind decode)
decided honestly verifies, and its capacity attempt rebuilds to the sealed figures; its
`result.json` rewritten to pass, or a figure rewritten, re-sealed and signed with the pinned
decision key, is refused naming the gate or the field. The open-loop part (steps, knee, burst,
soak) is judged on the published load run (docs/gpu/load), whose capacity attempt kept every
exchange but stopped before writing its record: the record is written here from those
exchanges with the stage's functions, then forged. Each guard of the rebuild is tested on its
own."""

from __future__ import annotations

import json
import shutil
import tarfile
from pathlib import Path
from typing import Any

import pytest
from rejudge_run import (
    all_pass,
    attempt_view,
    copy_run,
    judged_again,
    policy,
    unpack,
    verified,
)

from qualify.evidence.kept import AttemptView, NotKept, as_table, differences
from qualify.gates.files import default_gates_dir
from qualify.gates.runner import judge_stage
from qualify.gates.thresholds import Thresholds
from qualify.trust.rejudge import rejudge_attempt

HOUSE = policy("capacity")
CAP = "capacity/attempt-001"
ROOT = Path(__file__).resolve().parents[3]
LOAD = ROOT / "docs" / "gpu" / "load" / "llama-evidence.tar.xz"


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return unpack(tmp_path_factory.mktemp("published"))


def view_of(run: Path) -> AttemptView:
    return attempt_view(run, CAP)


def rebuild(view: AttemptView) -> dict[str, Any]:
    from qualify.capacity.rebuild import rebuild as again

    return as_table(again(view))


def edit(run: Path, change: Any) -> AttemptView:
    """The capacity result rewritten by `change` (no seal: the rebuild is called directly)."""
    path = run / CAP / "result.json"
    result = json.loads(path.read_text())
    change(result["data"])
    path.write_text(json.dumps(result))
    return view_of(run)


def problems(view: AttemptView) -> list[str]:
    return rejudge_attempt(view, default_gates_dir(), Thresholds())


# --- the published run, through verify --------------------------------------------------------


def test_the_honest_run_verifies_with_capacity_judged_again(
    published: Path, tmp_path: Path
) -> None:
    record, report = judged_again(published, tmp_path, "capacity")
    assert any(r.startswith("capacity/") for r in record.evaluation.reasons), "a degenerate answer"
    assert report.ok, report.problems
    note = next(n for n in report.notes if n.startswith(f"{CAP}: judged again from its exchanges"))
    assert "the power meter's joules" in note


def test_a_capacity_result_rewritten_to_pass_is_refused(published: Path, tmp_path: Path) -> None:
    record, report = judged_again(published, tmp_path, "capacity", all_pass)
    assert not any(r.startswith("capacity/") for r in record.evaluation.reasons)
    assert not report.ok
    assert any("gate capacity/degenerate is pass, judged again" in p for p in report.problems), (
        report.problems
    )


def _faster(result: dict[str, Any]) -> None:
    result["data"]["matrix"][0]["aggregate_output_tok_s"] *= 2


def test_a_matrix_figure_rewritten_is_refused_naming_the_field(
    published: Path, tmp_path: Path
) -> None:
    _, report = verified(published, tmp_path, HOUSE, CAP, _faster)
    assert not report.ok
    assert any("data.matrix[0].aggregate_output_tok_s is" in p for p in report.problems)


# --- the published run, rebuilt directly ------------------------------------------------------


def test_the_published_matrix_rebuilds_to_its_sealed_figures(published: Path) -> None:
    view = view_of(published)
    rebuilt = rebuild(view)
    assert differences(view.sealed, rebuilt) == []
    assert len(rebuilt["matrix"]) == 16 and len(rebuilt["kinds"]) == 8
    assert rebuilt["degenerate"][0]["where"] == "1024-c1"
    assert problems(view) == []
    assert any("predates the capacity load" in n for n in view.said)


def _undegenerate(data: dict[str, Any]) -> None:
    """The degenerate answer taken out of the record, its run counted."""
    data["degenerate"] = []
    for row in data["matrix"]:
        for run in row["run_records"]:
            for st in run["streams"]:
                st["degenerate"] = None


def test_a_degenerate_answer_hidden_is_refused(published: Path, tmp_path: Path) -> None:
    view = edit(copy_run(published, tmp_path), _undegenerate)
    found = problems(view)
    assert any("data.degenerate (length 0, from the exchanges 1)" in p for p in found), found


def test_a_warmup_rewritten_is_refused(published: Path, tmp_path: Path) -> None:
    def fewer(data: dict[str, Any]) -> None:
        data["warmups"]["candidate"][0]["completion_tokens"] = 1

    view = edit(copy_run(published, tmp_path), fewer)
    assert differences(view.sealed, rebuild(view)) == ["warmups.candidate[0].completion_tokens"]


def test_settings_not_the_candidates_cannot_be_judged_again(
    published: Path, tmp_path: Path
) -> None:
    def more(data: dict[str, Any]) -> None:
        data["settings"]["runs"] = 4

    view = edit(copy_run(published, tmp_path), more)
    with pytest.raises(NotKept, match="settings"):
        rebuild(view)


def test_a_stream_with_another_requests_exchange_is_refused(
    published: Path, tmp_path: Path
) -> None:
    def swap(data: dict[str, Any]) -> None:
        a, b = data["matrix"][1]["run_records"][0]["streams"]
        a["files"], b["files"] = b["files"], a["files"]

    view = edit(copy_run(published, tmp_path), swap)
    with pytest.raises(NotKept, match="is another request's"):
        rebuild(view)


def test_a_stream_naming_no_exchange_is_refused(published: Path, tmp_path: Path) -> None:
    def bare(data: dict[str, Any]) -> None:
        data["matrix"][0]["run_records"][0]["streams"][0]["files"] = []

    view = edit(copy_run(published, tmp_path), bare)
    with pytest.raises(NotKept, match="names no kept exchange"):
        rebuild(view)


def test_a_run_short_of_a_stream_is_refused(published: Path, tmp_path: Path) -> None:
    def short(data: dict[str, Any]) -> None:
        del data["matrix"][1]["run_records"][0]["streams"][1]

    view = edit(copy_run(published, tmp_path), short)
    with pytest.raises(NotKept, match="1 streams kept, the run sends 2"):
        rebuild(view)


def test_a_cell_short_of_a_run_is_refused(published: Path, tmp_path: Path) -> None:
    def short(data: dict[str, Any]) -> None:
        del data["matrix"][0]["run_records"][2]

    view = edit(copy_run(published, tmp_path), short)
    with pytest.raises(NotKept, match="2 runs recorded, the candidate asks 3"):
        rebuild(view)


def test_a_cell_left_out_of_the_record_is_refused(published: Path, tmp_path: Path) -> None:
    def fewer(data: dict[str, Any]) -> None:
        del data["matrix"][5]

    view = edit(copy_run(published, tmp_path), fewer)
    with pytest.raises(NotKept, match="kept exchanges no run of the record holds"):
        rebuild(view)


def test_a_saturation_the_figures_do_not_show_is_refused(published: Path, tmp_path: Path) -> None:
    def stop(data: dict[str, Any]) -> None:
        why = "p95 TTFT 0.50 s is past the bound 100 s"
        data["saturation"]["candidate"]["256"] = {"at": 2, "why": why}

    view = edit(copy_run(published, tmp_path), stop)
    with pytest.raises(NotKept, match="saturated as recorded, not as measured"):
        rebuild(view)


def test_a_saturation_by_ttft_that_the_figures_show_holds(published: Path, tmp_path: Path) -> None:
    """A stop by p95 TTFT (its bound the house's, taken as recorded) that the cell's rebuilt
    p95 is past: the cells above it are the ones not run."""
    view = view_of(published)
    p95 = next(r for r in view.sealed["matrix"] if r["cell"] == "256-c2")["ttft_p95_s"]
    why = f"p95 TTFT {p95:.2f} s is past the bound 0.001 s"

    def stop(data: dict[str, Any]) -> None:
        data["saturation"]["candidate"]["256"] = {"at": 2, "why": why}

    rebuilt = rebuild(edit(copy_run(published, tmp_path), stop))
    assert rebuilt["saturation"]["candidate"] == {"256": {"at": 2, "why": why}}
    assert [x["cell"] for x in rebuilt["not_run"]] == ["256-c4", "256-c6"]


# --- the open-loop load (the load run's exchanges, its record written here) --------------------


@pytest.fixture(scope="module")
def load_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The first published load run, its capacity record written from its kept exchanges with
    the stage's functions (the run stopped before writing it), its gates judged."""
    dest = tmp_path_factory.mktemp("load")
    with tarfile.open(LOAD) as tf:
        first = sorted({m.name.split("/")[1] for m in tf.getmembers() if m.name.count("/") > 1})[0]
        top = f"{tf.getmembers()[0].name.split('/')[0]}/{first}"
        tf.extractall(dest, members=[m for m in tf.getmembers() if m.name.startswith(top)])
    run = dest / top
    for p in [run, *run.rglob("*")]:
        p.chmod(0o755 if p.is_dir() else 0o644)
    path = run / CAP / "result.json"
    result = json.loads(path.read_text())
    result.update(status="finished", data=_skeleton(view_of(run)))
    path.write_text(json.dumps(result))
    view = view_of(run)
    data = rebuild(view)
    gates, _ = judge_stage("capacity", default_gates_dir(), data, Thresholds())
    result.update(data=data, gates=[g.model_dump(mode="json") for g in gates])
    path.write_text(json.dumps(result))
    return run


def _streams(view: AttemptView, label: str, planned: int) -> list[dict[str, Any]]:
    kept = {n.rsplit("-s", 1)[1]: n for n in view.names() if f"-{label}-s" in f"-{n[5:]}"}
    return [
        {"files": [kept[f"{i}.json"]], "lag_ms": 1.0}
        if f"{i}.json" in kept
        else {"unfinished": "never sent", "files": []}
        for i in range(1, planned + 1)
    ]


def _run(view: AttemptView, label: str, c: int) -> dict[str, Any]:
    idle = {"idle": True, "reason": "idle"}
    return {
        "label": label,
        "run": 1,
        "idle": {"before": idle, "after": idle},
        "window_s": 1.0,
        "streams": [{"files": st["files"]} for st in _streams(view, label, c)],  # a run's, no lag
    }


def _skeleton(view: AttemptView) -> dict[str, Any]:
    """What the stage recorded that is not in the exchanges (windows, idle checks, lag, why the
    search stopped, the seed, the SLOs); the rest is measured from the exchanges."""
    from qualify.capacity.knee import step_size
    from qualify.capacity.slo import effective

    assert view.candidate is not None
    s = view.candidate.stages.capacity
    slo = effective(Thresholds(), s.slo)
    cells: list[dict[str, Any]] = []
    for step, rate in enumerate([8.0, 16.0, 32.0, (16.0 * 32.0) ** 0.5], start=1):
        label = f"load-poisson-{rate:.4g}rps"
        n = step_size(rate, s.load)
        cells.append({"label": label, "arrival": "poisson", "rate_rps": rate, "step": step})
        cells[-1].update(cell=f"poisson-{rate:.4g}rps", window_s=6.0)
        cells[-1]["streams"] = _streams(view, label, n)
    burst = {"label": "load-burst-32", "arrival": "burst", "cell": "burst-32", "window_s": 2.0}
    cells.append({**burst, "streams": _streams(view, "load-burst-32", 32)})
    soak = {"rate_rps": 12.0, "duration_s": 40.0, "window_s": 45.0}
    soak["streams"] = _streams(view, "soak", _soak_planned(12.0, 40.0))
    return {
        "settings": s.model_dump(mode="json"),
        "matrix": [
            {"lane": "candidate", "target": 256, "concurrency": c, "length": 256}
            | {"cell": f"256-c{c}", "run_records": [_run(view, f"cap-candidate-256-c{c}-r1", c)]}
            for c in (1, 8)
        ],
        "kinds": [
            {"kind": "prose", "depth": 256, "target": 256, "sized_tokens": 254}
            | {"run_records": [_run(view, "kind-prose-256-r1", 1)]}
        ],
        "saturation": {"candidate": {}},
        "slo": slo.model_dump(mode="json"),
        "load": {"lane": "candidate", "kind": "prose", "cells": cells, "soak": soak}
        | {"knee": {"stopped": "saturated at 32 req/s"}},
        "seed": 1,
    }


def _soak_planned(rate: float, duration: float) -> int:
    from qualify.capacity.openloop import poisson
    from qualify.capacity.reload import SOAK_SEED

    n = int(rate * duration) + 1
    return len([o for o in poisson(rate, 3 * n + 20, 1 + SOAK_SEED) if o < duration])


def test_the_load_record_written_from_its_exchanges_is_judged_again(load_run: Path) -> None:
    view = view_of(load_run)
    assert problems(view) == []
    load = view.sealed["load"]
    assert load["knee"]["rate_rps"] == 16.0 and load["knee"]["first_over"] == pytest.approx(
        22.63, abs=0.01
    )
    assert load["cells"][4]["goodput"] == 1.0
    assert load["soak"]["good"] < load["soak"]["requests"]
    assert any("why the knee search stopped" in t for t in view.trusted)


def _load_copy(load_run: Path, tmp_path: Path) -> Path:
    out = tmp_path / "run"
    shutil.copytree(load_run, out)
    return out


def test_a_knee_rewritten_is_refused(load_run: Path, tmp_path: Path) -> None:
    def higher(data: dict[str, Any]) -> None:
        data["load"]["knee"]["rate_rps"] = 32.0

    found = problems(edit(_load_copy(load_run, tmp_path), higher))
    assert any("data.load.knee.rate_rps is 32.0" in p for p in found), found


def test_a_soak_goodput_rewritten_is_refused(load_run: Path, tmp_path: Path) -> None:
    def good(data: dict[str, Any]) -> None:
        soak = data["load"]["soak"]
        soak["good"], soak["goodput"] = soak["requests"], 1.0

    found = problems(edit(_load_copy(load_run, tmp_path), good))
    assert any("data.load.soak.good is" in p for p in found), found


def test_a_failing_step_left_out_is_refused(load_run: Path, tmp_path: Path) -> None:
    def drop(data: dict[str, Any]) -> None:
        del data["load"]["cells"][2]

    view = edit(_load_copy(load_run, tmp_path), drop)
    with pytest.raises(NotKept):
        rebuild(view)


def test_a_step_relabelled_to_another_rate_is_refused(load_run: Path, tmp_path: Path) -> None:
    def relabel(data: dict[str, Any]) -> None:
        data["load"]["cells"][2]["rate_rps"] = 64.0

    view = edit(_load_copy(load_run, tmp_path), relabel)
    with pytest.raises(NotKept, match="not the one its rate names"):
        rebuild(view)


def test_a_step_short_of_its_planned_requests_is_refused(load_run: Path, tmp_path: Path) -> None:
    def short(data: dict[str, Any]) -> None:
        data["load"]["cells"][0]["streams"].pop()

    view = edit(_load_copy(load_run, tmp_path), short)
    with pytest.raises(NotKept, match="47 requests recorded, 48 planned"):
        rebuild(view)


def test_an_answered_request_with_no_exchange_is_refused(load_run: Path, tmp_path: Path) -> None:
    def bare(data: dict[str, Any]) -> None:
        data["load"]["cells"][0]["streams"][0] = {"files": []}

    view = edit(_load_copy(load_run, tmp_path), bare)
    with pytest.raises(NotKept, match="answered, but no exchange is kept"):
        rebuild(view)


def test_a_soak_at_another_rate_than_the_candidates_is_refused(
    load_run: Path, tmp_path: Path
) -> None:
    def slower(data: dict[str, Any]) -> None:
        data["settings"]["soak"]["rate_rps"] = 5.0

    view = edit(_load_copy(load_run, tmp_path), slower)
    assert view.candidate is not None
    view.candidate.stages.capacity.soak.rate_rps = 5.0
    with pytest.raises(NotKept, match=r"the soak ran at 12\.0 req/s"):
        rebuild(view)


def test_a_load_without_its_slos_cannot_be_judged_again(load_run: Path, tmp_path: Path) -> None:
    def no_slo(data: dict[str, Any]) -> None:
        del data["slo"]

    view = edit(_load_copy(load_run, tmp_path), no_slo)
    with pytest.raises(NotKept, match="no SLOs"):
        rebuild(view)


def test_a_warmup_naming_no_exchange_is_refused(published: Path, tmp_path: Path) -> None:
    def bare(data: dict[str, Any]) -> None:
        data["warmups"]["candidate"][0]["files"] = []

    view = edit(copy_run(published, tmp_path), bare)
    with pytest.raises(NotKept, match=r"warm-up .* names no kept exchange"):
        rebuild(view)


def test_a_failed_request_saturates_its_cell_as_the_stage_would(
    published: Path, tmp_path: Path
) -> None:
    """A request of 256-c2 whose exchange failed: the cell saturates there (the cells above it
    not run), whatever the record says."""
    run = copy_run(published, tmp_path)
    view = view_of(run)
    name = view.sealed["matrix"][1]["run_records"][0]["streams"][0]["files"][0]
    kept = json.loads((run / CAP / name).read_text())
    kept["error"], kept["error_kind"] = "connection reset", "transport"
    (run / CAP / name).write_text(json.dumps(kept))
    diff = differences(view.sealed, rebuild(view_of(run)))
    assert "matrix[1].failed" in diff and "matrix[1].saturated" in diff, diff
    assert "not_run (length 0, from the exchanges 2)" in diff


def test_a_step_that_was_a_harness_error_is_no_bound_of_the_knee(
    load_run: Path, tmp_path: Path
) -> None:
    def harness(data: dict[str, Any]) -> None:
        data["load"]["cells"][3]["harness_error"] = "p99 send lag 900 ms over 50 ms"

    rebuilt = rebuild(edit(_load_copy(load_run, tmp_path), harness))
    assert rebuilt["load"]["knee"]["first_over"] == 32.0


def _first_stream(data: dict[str, Any]) -> dict[str, Any]:
    st: dict[str, Any] = data["matrix"][0]["run_records"][0]["streams"][0]
    return st


def test_a_judgment_against_an_answer_by_earlier_code_is_kept_and_named(
    published: Path, tmp_path: Path
) -> None:
    """An earlier build's answer checks called an answer broken that this code calls right (the
    published vLLM run's Markdown rules read as garble): kept as recorded, said in the notes,
    since it can only block. The same record claiming this code's `check_code` is refused."""
    from qualify.capacity.answers import answer_code

    def harsher(data: dict[str, Any]) -> None:
        _first_stream(data)["broken"] = ["garble: character '=' repeated 25 times in a row"]

    view = edit(copy_run(published, tmp_path), harsher)
    again = rebuild(view)
    assert _first_stream(again)["broken"] == _first_stream(view.sealed)["broken"]
    assert any("earlier answer-checking code" in t for t in view.trusted)

    def this_code(data: dict[str, Any]) -> None:
        harsher(data)
        data["check_code"] = answer_code()

    strict = edit(copy_run(published, tmp_path / "strict"), this_code)
    found = problems(strict)
    assert any("streams[0].broken" in p for p in found), found


def test_a_house_listing_capacity_check_codes_refuses_a_record_of_another(
    published: Path, tmp_path: Path
) -> None:
    """The published run's answers were judged by earlier code (no check_code): a house that
    accepts only this installation's capacity code has it refused, naming the stage."""
    from qualify.preflight.code import check_code

    text = f'{HOUSE}\n[check_codes]\ncapacity = ["{check_code("capacity")}"]\n'
    _, report = verified(published, tmp_path, text)
    assert not report.ok
    assert any("nor one the house accepts for capacity" in p for p in report.problems)


def test_the_soaks_acceptance_is_derived_again_from_its_kept_series(
    load_run: Path, tmp_path: Path
) -> None:
    """A planted counter series that drifts: verify derives the thirds from it and the gate
    fails; the record's drift rewritten to a steady one is refused naming the field."""
    from qualify.capacity.specdrift import acceptance_thirds

    falling: list[list[float]] = [[0.0, 0.0, 0.0, 0.0]]
    for t in range(1, 31):
        d, tok, acc = falling[-1][1:]
        falling.append([float(t), d + 10, tok + 40, acc + (28 if t <= 10 else 12)])

    def planted(data: dict[str, Any]) -> None:
        soak = data["load"]["soak"]
        soak["acceptance_series"] = falling
        soak["acceptance_drift"] = acceptance_thirds(falling).model_dump(mode="json")

    run = _load_copy(load_run, tmp_path)
    rebuilt = rebuild(edit(run, planted))
    drift = rebuilt["load"]["soak"]["acceptance_drift"]
    assert drift["rate_drift_pct"] < -50
    gates, _ = judge_stage("capacity", default_gates_dir(), rebuilt, Thresholds())
    (g,) = [g for g in gates if g.gate == "soak-acceptance"]
    assert g.verdict.value == "fail", g.reasons

    def steady(data: dict[str, Any]) -> None:
        data["load"]["soak"]["acceptance_drift"]["rate_drift_pct"] = 0.0

    found = problems(edit(run, steady))
    assert any("data.load.soak.acceptance_drift.rate_drift_pct is 0.0" in p for p in found), found


def test_a_soak_without_its_acceptance_series_is_of_an_earlier_form(load_run: Path) -> None:
    view = view_of(load_run)
    rebuild(view)
    assert "capacity-soak-acceptance" in view.earlier
