"""The decision a reviewer acts on: the first screen, links to evidence, nothing said twice,
short cells, and plots whose points are the figures in the tables."""

from __future__ import annotations

import json
import re
import tarfile
from pathlib import Path

import decision_contract_run as contract_run
import pytest
from test_decision_document import check_golden

from qualify.decision import document, plots
from qualify.decision.conclude import conclude, setup
from qualify.decision.reading import run_info
from qualify.decision.record import DecisionRecord
from qualify.decision.render import preview
from qualify.decision.signing import keyid
from qualify.decision.statement import envelope_path, sign_attempt
from qualify.evidence.store import RunDir
from qualify.records import Verdict

ROOT = Path(__file__).resolve().parents[3]
# The roomy run an H200 recorded on 2026-12-02 (as once published in docs/gpu), kept as a fixture.
GPU_TGZ = ROOT / "tests" / "golden" / "recorded" / "gpu-roomy-20261202.tgz"
ROOMY = "evidence/smollm2-135m-gpu-roomy/20261202T210104Z-744939"
CELL_BOUND = 200
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _roomy(tmp: Path) -> RunDir:
    """The roomy run recorded on an H200, unpacked."""
    with tarfile.open(GPU_TGZ) as tgz:
        members = [m for m in tgz.getmembers() if m.name.startswith(ROOMY)]
        tgz.extractall(tmp, members=members, filter="data")
    return RunDir(tmp / ROOMY)


def _preview_with_plots(run: RunDir) -> tuple[DecisionRecord, str]:
    """The record derived now, its plots drawn where its decision attempt would be, the text."""
    record = preview(run, setup(None))
    here = document.attempt_dir(run, record)
    here.mkdir(parents=True)
    for name, png in document.write_plots(run, record):
        (here / name).write_bytes(png)
    return record, document.render(run, record, run_info(run))


@pytest.fixture(scope="module")
def roomy(tmp_path_factory: pytest.TempPathFactory) -> tuple[RunDir, DecisionRecord, str]:
    run = _roomy(tmp_path_factory.mktemp("gpu"))
    record, text = _preview_with_plots(run)
    return run, record, text


def _first_screen(text: str) -> str:
    return text.split("\n## ", 1)[0]


def _cells(text: str) -> list[str]:
    return [
        c.strip()
        for line in text.splitlines()
        if line.startswith("|") and not line.startswith("| ---")
        for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))
    ]


def test_recorded_gpu_run_renders_its_golden(roomy: tuple[RunDir, DecisionRecord, str]) -> None:
    check_golden("decision-gpu-roomy.md", roomy[2])


def test_first_screen_holds_the_headline(roomy: tuple[RunDir, DecisionRecord, str]) -> None:
    _, record, text = roomy
    first = _first_screen(text)
    assert len(first.splitlines()) < 40
    assert first.startswith("# smollm2-135m-gpu-roomy: **no-promote**")
    for needle in (
        "Role: this decision gates `demo-chat-gpu` (no house repository given",
        "- GPU: 1 x NVIDIA H200 (143,771 MiB each); driver not recorded",
        "- Engine: llama.cpp build b0-unknown",
        "- A/B decode p50: 735.9 tok/s vs 763.6 tok/s (-3.6% (within noise); 95% interval "
        "-98.8 to -11.2 tok/s)",
        "- A/B E2E p50: 145 ms vs 188 ms",
        "- acceptance: 69.5%, 35.64 tokens per draft (implausible, see caveats)",
        "- context reached: cold 1,017 passed of 7,937 sent",
        "- minimum free VRAM: GPU 0 141,687 MiB (pass) against a 3,072 MiB reserve",
        "- fidelity (client/server decode, median): context 1.003, ab 1.001",
        "Exit condition: A fresh run of smollm2-135m-gpu-roomy",
    ):
        assert needle in first, needle
    blocking = [g.key for g in record.evaluation.gates if g.status in ("blocks", "vetoes")]
    assert len(blocking) == 11
    for key in blocking:
        line = next(x for x in first.splitlines() if x.startswith(f"- `{key}` "))
        assert "([evidence](../../" in line, line


def test_a_clean_run_says_nothing_blocks(tmp_path: Path) -> None:
    """With every blocking gate removed from the record, the first screen says so plainly."""
    run = contract_run.build(tmp_path)
    record = preview(run, setup(None))
    ev = record.evaluation.model_copy(update={"reasons": [], "missing": []})
    for g in ev.gates:
        g.status, g.verdict = "pass", Verdict.PASS
    record = record.model_copy(update={"evaluation": ev, "decision": "promote"})
    text = document.render(run, record, run_info(run))
    assert "Nothing blocks." in _first_screen(text)
    assert "The answer holds for the recipe as pinned" in text


def _links_resolve(run: RunDir, record: DecisionRecord, text: str) -> list[Path]:
    here = document.attempt_dir(run, record)
    found = []
    for target in LINK.findall(text):
        path = (here / target).resolve()
        assert path.is_file(), target
        assert run.path.resolve() in path.parents, target
        found.append(path)
    return found


def test_every_link_of_the_recorded_run_resolves(roomy: tuple[RunDir, DecisionRecord, str]) -> None:
    run, record, text = roomy
    links = _links_resolve(run, record, text)
    assert any(p.name.endswith(".png") for p in links)
    assert sum("/preflight/" in p.as_posix() for p in links) >= 8


def test_every_link_is_a_sealed_signed_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A concluded and signed decision: each link is a subject of the signed statement."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    monkeypatch.setenv("QUALIFY_TICKETS", str(tmp_path / "tickets"))
    run = contract_run.build(tmp_path / "ev")
    priv = Ed25519PrivateKey.generate()
    record = conclude(run, setup(None))
    sign_attempt(run, record.attempt, priv)
    here = document.attempt_dir(run, record)
    text = (here / "decision.md").read_text()
    env = json.loads(envelope_path(run, record.attempt).read_text())
    assert env["signatures"][0]["keyid"] == keyid(priv.public_key())
    statement = json.loads((here / "statement.json").read_text())
    subjects = {s["name"] for s in statement["subject"]}
    links = _links_resolve(run, record, text)
    assert links
    for p in links:
        assert p.relative_to(run.path.resolve()).as_posix() in subjects, p
    drawn = [p for p in here.iterdir() if p.suffix == ".png"]
    assert {p.name for p in drawn} == {"context-ladder.png", "acceptance-by-position.png"}
    assert "Capacity: not run" in text and "VRAM plot: no GPU telemetry was recorded." in text


def test_no_failure_text_is_written_twice(roomy: tuple[RunDir, DecisionRecord, str]) -> None:
    _, record, text = roomy
    bad = [g for g in record.evaluation.gates if g.verdict is not Verdict.PASS]
    assert bad
    for g in bad:
        assert f"`{g.key}`" in text, g.key
        said = document.reason_parts(g)[1]
        assert text.count(said) <= 1, said
        for r in g.reasons:
            assert text.count(r) <= 1, r
    said = [document.reason_parts(g)[1] for g in bad]
    assert len(set(said)) < len(said)  # the run repeats a failure: it is still written once
    assert sum(text.count(x) for x in set(said)) == len(set(said))


def test_no_table_cell_is_long(roomy: tuple[RunDir, DecisionRecord, str], tmp_path: Path) -> None:
    run = contract_run.build(tmp_path)
    for text in (roomy[2], document.render(run, preview(run, setup(None)), run_info(run))):
        cells = _cells(text)
        assert cells and max(len(c) for c in cells) <= CELL_BOUND


def test_a_long_reason_is_one_short_line() -> None:
    assert document.short("a\nb " * 200, 50).endswith("…")
    assert len(document.short("x" * 500, 50)) == 50
    assert "\n" not in document.short("a\nb")
    # quoted markup shows when rendered instead of vanishing as an HTML tag
    assert document.short("echoes ['<tool_response>']") == "echoes ['&lt;tool_response>']"


def test_plots_show_the_figures_of_the_tables(roomy: tuple[RunDir, DecisionRecord, str]) -> None:
    run, record, text = roomy
    by_name = {p.name: p for p in document.plot_plan(run, record)}
    data = {
        s: json.loads((run.path / s / "attempt-001" / "result.json").read_text())["data"]
        for s in ("context", "ab", "vram")
    }
    ladder = by_name["context-ladder.png"]
    cold = [r for r in data["context"]["rows"] if r["pass"] == "cold"]
    assert ladder.panels[0].series["cold"] == sorted(
        (float(r["actual_prompt_tokens"]), r["ttft_s"]) for r in cold
    )
    warm_rows = [x for x in text.splitlines() if x.startswith("| warm |")]
    for (x, y), row in zip(ladder.panels[1].series["warm"], warm_rows, strict=True):
        assert f"| {x:,.0f} |" in row and f"| {y:,.1f} tok/s |" in row, row
    acc = by_name["acceptance-by-position.png"].panels[0].series["acceptance"]
    assert [y for _, y in acc] == data["ab"]["acceptance"]["per_position"]
    vram = by_name["vram-series.png"]
    card = data["vram"]["cards"][0]
    lowest = min(s["min_free_mib"] for s in card["stages"].values())
    assert min(y for _, y in vram.panels[0].series["GPU 0"]) == lowest
    assert vram.panels[0].hlines["reserve"] == data["vram"]["reserve_gib"] * 1024
    ab = by_name["ab-distributions.png"]
    lane = data["ab"]["lanes"]["candidate"]
    per_request = [q["decode_tok_s"] for r in lane["runs"] for q in r["requests"]]
    assert sorted(y for _, y in ab.panels[0].series[lane["name"]]) == sorted(per_request)
    assert by_name["capacity-aggregate.png"].empty
    assert "Capacity: not run (not listed in stages.run)." in text
    for p in by_name.values():
        assert (f"]({p.name})" in text) is (not p.empty)


def test_capacity_plot_points_are_the_matrix() -> None:
    matrix = [
        {"lane": "candidate", "length": 256, "concurrency": c, "aggregate_output_tok_s": v}
        for c, v in ((1, 30.0), (2, 55.5), (4, None))
    ]
    plot = plots.capacity({"matrix": matrix})
    assert plot.panels[0].series == {"candidate 256 tok": [(1.0, 30.0), (2.0, 55.5)]}
    assert plots.draw(plot).startswith(b"\x89PNG")


def test_no_data_no_plot() -> None:
    plan = plots.plan(RunDir(Path("/nonexistent/x/y")), {})
    assert all(p.empty for p in plan)
    assert plots.drawn(plan) == []


def test_many_blocking_reasons_keep_the_first_screen_short(tmp_path: Path) -> None:
    """The published H200 roomy run has dozens of blocking gates: the first screen shows the
    vetoes first and a count by stage; every other reason follows it, each written once."""
    tgz = ROOT / "docs" / "gpu" / "evidence.tgz"
    with tarfile.open(tgz) as tf:
        names = [m.name for m in tf.getmembers() if m.name.endswith("/run.json")]
        top = next(n.rsplit("/", 1)[0] for n in names if "gpu-roomy" in n)
        tf.extractall(
            tmp_path, members=[m for m in tf.getmembers() if m.name.startswith(top)], filter="data"
        )
    run = RunDir(tmp_path / top)
    record = preview(run, setup(None))
    text = document.render(run, record, run_info(run))
    first = _first_screen(text)
    assert len(first.splitlines()) < 40
    blocking = [g for g in record.evaluation.gates if g.status in ("blocks", "vetoes")]
    assert len(blocking) > document.FIRST_SCREEN_REASONS
    assert "## More blocking reasons" in text and "more (" in first
    lines = [x for x in text.splitlines() if x.startswith("- `")]
    for g in blocking:
        assert sum(x.startswith(f"- `{g.key}` ") for x in lines) == 1, g.key
    vetoes = [g.key for g in blocking if g.status == "vetoes"]
    assert all(f"- `{k}` vetoes" in first for k in vetoes)
