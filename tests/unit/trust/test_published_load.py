"""The published load runs of the pace rule on an H200 (docs/gpu/load: vLLM 0.26.0 in
vllm-evidence.tar.xz, the CUDA llama-server in llama-pace-evidence.tar.xz): a run verifies as
published, with the key it was signed with, from a copy in another directory; its knee is the
last step served at pace; a step's pace rewritten so that the step holds, re-sealed and signed
with a pinned decision key, is refused naming the field."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path
from typing import Any

import pytest
from rejudge_run import checked, copy_run, policy, verified

from qualify.capacity.knee import KEEP_PACE

ROOT = Path(__file__).resolve().parents[3]
LOAD = ROOT / "docs" / "gpu" / "load"
# (tarball, folder of the pace-rule runs, one run in it)
PUBLISHED = {
    "vllm": (
        "vllm-evidence.tar.xz",
        "vllm-pace",
        "smollm2-135m-gpu-load-vllm/20261204T040234Z-064f7b",
    ),
    "llama-server": (
        "llama-pace-evidence.tar.xz",
        "llama-pace",
        "smollm2-135m-gpu-load-llama/20261204T064800Z-f770d1",
    ),
}
CAP = "capacity/attempt-001"
HOUSE = policy("capacity")


def _unpacked(tarball: str, folder: str, dest: Path) -> Path:
    """`folder` of a tarball published in docs/gpu/load, unpacked under `dest`."""
    with tarfile.open(LOAD / tarball) as tf:
        top = (f"./{folder}/", f"{folder}/")
        wanted = [m for m in tf.getmembers() if m.name.startswith(top)]
        tf.extractall(dest, members=wanted, filter="data")
    return dest / folder


@pytest.fixture(scope="module", params=sorted(PUBLISHED))
def published(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The pace-rule folder of one engine's published tarball, unpacked."""
    tarball, folder, _ = PUBLISHED[request.param]
    return _unpacked(tarball, folder, tmp_path_factory.mktemp(request.param))


def _run(published: Path) -> Path:
    return published / next(r for _, f, r in PUBLISHED.values() if f == published.name)


def _cells(run: Path) -> list[dict[str, Any]]:
    result = json.loads((run / CAP / "result.json").read_text())
    cells: list[dict[str, Any]] = result["data"]["load"]["cells"]
    return cells


def test_the_published_run_verifies_with_the_key_it_was_signed_with(
    published: Path, tmp_path: Path
) -> None:
    run = copy_run(_run(published), tmp_path)
    report = checked(run / "decision" / "attempt-001.dsse.json", published / "gpu.pub")
    assert report.ok, report.problems
    assert any(n.startswith(f"{CAP}: judged again from its exchanges") for n in report.notes)


def test_its_knee_is_the_last_step_served_at_pace(published: Path) -> None:
    run = _run(published)
    result = json.loads((run / CAP / "result.json").read_text())
    knee = result["data"]["load"]["knee"]
    by_cell = {c["cell"]: c for c in _cells(run)}
    held = by_cell[knee["cell"]]
    assert held["pace"] >= KEEP_PACE and held["goodput"] >= 0.9
    over = next(c for c in _cells(run) if c["rate_rps"] == knee["first_over"])
    assert over["goodput"] >= 0.9, "the step over the knee held the floor: pace stopped it"
    assert over["pace"] < KEEP_PACE
    assert "queue grew" in knee["stopped"]


def test_a_pace_rewritten_to_hold_is_refused_naming_the_field(
    published: Path, tmp_path: Path
) -> None:
    cells = _cells(_run(published))
    i = next(i for i, c in enumerate(cells) if c.get("pace") is not None and c["pace"] < KEEP_PACE)

    def at_pace(result: dict[str, Any]) -> None:
        result["data"]["load"]["cells"][i]["pace"] = 1.0

    _, report = verified(_run(published), tmp_path, HOUSE, CAP, at_pace)
    assert not report.ok
    assert any(f"load.cells.{i}.pace" in p or f"cells[{i}].pace" in p for p in report.problems), (
        report.problems
    )


def test_the_decision_shows_each_steps_pace(published: Path) -> None:
    """The load table says how much of each step's offered rate was served."""
    from qualify.decision import document
    from qualify.decision.conclude import latest
    from qualify.evidence.store import RunDir
    from qualify.present.reading import run_view

    run = RunDir(_run(published))
    record = latest(run, None)
    assert record is not None
    text = document.render(run_view(run, record), record)
    rows = {c["cell"]: c for c in _cells(_run(published))}
    over = next(c for c in rows.values() if c.get("pace") is not None and c["pace"] < KEEP_PACE)
    line = next(x for x in text.splitlines() if x.startswith(f"| {over['cell']} |"))
    assert f"(pace {over['pace']:.2f})" in line


def test_the_first_screen_knee_is_read_back_from_the_evidence(published: Path) -> None:
    """The headline's load line carries the knee's step as the evidence recorded it: the rate
    offered, sent and completed, the requests, the pace and the goodput."""
    from qualify.decision import document
    from qualify.decision.conclude import latest
    from qualify.evidence.store import RunDir
    from qualify.present.reading import run_view

    run = RunDir(_run(published))
    record = latest(run, None)
    assert record is not None
    text = document.render(run_view(run, record), record)
    (line,) = [x for x in text.splitlines() if x.startswith("- load: knee ")]
    data = json.loads((_run(published) / CAP / "result.json").read_text())["data"]["load"]
    knee = data["knee"]
    cell = next(c for c in data["cells"] if c["cell"] == knee["cell"])
    assert line.startswith(
        f"- load: knee {knee['rate_rps']:.3g} req/s offered, {cell['offered_rps']:.3g} sent, "
        f"{cell['achieved_rps']:.3g} completed ({cell['completed']} of {cell['requests']} "
        f"requests, pace {cell['pace']:.2f} of it), goodput {100 * knee['goodput']:.0f}%"
    ), line
    soak = data["soak"]
    assert f"soak at {soak['rate_rps']:.3g} req/s" in line
    assert f"{soak['completed']} of {soak['planned']} completed" in line


# --- the incumbent at the candidate's edge, on the H200 (llama-incumbent-evidence.tar.xz) --------

EDGE_RUN = "smollm2-135m-gpu-load-llama/20261204T071217Z-9fa90a"


@pytest.fixture(scope="module")
def edge_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dest = tmp_path_factory.mktemp("llama-incumbent")
    return _unpacked("llama-incumbent-evidence.tar.xz", "llama-incumbent", dest)


def test_the_published_incumbent_edge_verifies_and_repeats_the_candidates_arrivals(
    edge_run: Path, tmp_path: Path
) -> None:
    """Signed on the H200 beside an incumbent: verify judges the incumbent's steps again from
    their exchanges; each repeats the candidate's step at its knee and the first rate over it."""
    run = copy_run(edge_run / EDGE_RUN, tmp_path)
    report = checked(run / "decision" / "attempt-001.dsse.json", edge_run / "gpu.pub")
    assert report.ok, report.problems
    load = json.loads((run / CAP / "result.json").read_text())["data"]["load"]
    edge = load["incumbent"]
    assert edge["status"] == "measured"
    by_step = {c["step"]: c for c in load["cells"] if c["arrival"] == "poisson"}
    rates = [c["rate_rps"] for c in edge["cells"]]
    assert rates == [load["knee"]["rate_rps"], load["knee"]["first_over"]]
    for inc in edge["cells"]:
        cand = by_step[inc["step"]]
        assert inc["rate_rps"] == cand["rate_rps"] and inc["requests"] == cand["requests"]
        assert [s["planned_s"] for s in inc["streams"]] == [s["planned_s"] for s in cand["streams"]]
