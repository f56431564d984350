"""The decision a reviewer acts on: the first screen, links to evidence, nothing said twice,
short cells, and plots whose points are the figures in the tables."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import tarfile
from pathlib import Path
from typing import Any

import decision_contract_run as contract_run
import pytest
from test_decision_document import check_golden

from qualify.capacity import section as capacity_section
from qualify.capacity.record import MatrixRow
from qualify.capacity.record import Record as CapacityRecord
from qualify.decision import document
from qualify.decision.conclude import conclude, latest, setup
from qualify.decision.render import preview
from qualify.decision.statement import attempt_rel, envelope_path, sign_attempt
from qualify.evidence.listing import Listing
from qualify.evidence.signing import keyid
from qualify.evidence.store import RunDir
from qualify.present import plots, wording
from qualify.present.reading import RunView, run_view
from qualify.present.record import DecisionRecord
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
    here = run.path / attempt_rel(record.attempt)
    here.mkdir(parents=True)
    for name, png in plots.drawn(run_view(run, record)):
        (here / name).write_bytes(png)
    return record, document.render(run_view(run, record), record)


@pytest.fixture(scope="module")
def roomy(tmp_path_factory: pytest.TempPathFactory) -> tuple[RunDir, DecisionRecord, str]:
    run = _roomy(tmp_path_factory.mktemp("gpu"))
    record, text = _preview_with_plots(run)
    return run, record, text


PUBLISHED = ROOT / "docs" / "gpu" / "evidence.tgz"


def _published(tmp: Path, kind: str) -> RunDir:
    """A run published in docs/gpu (recorded on an H200 under the house policy), unpacked."""
    with tarfile.open(PUBLISHED) as tf:
        names = [m.name for m in tf.getmembers() if m.name.endswith("/run.json")]
        top = next(n.rsplit("/", 1)[0] for n in names if f"gpu-{kind}/" in n)
        members = [m for m in tf.getmembers() if m.name.startswith(top)]
        tf.extractall(tmp, members=members, filter="data")
    return RunDir(tmp / top)


@pytest.fixture(scope="module")
def roomy3(tmp_path_factory: pytest.TempPathFactory) -> tuple[RunDir, DecisionRecord, str]:
    """The 2026-12-03 roomy run, rendered from its signed decision record."""
    run = _published(tmp_path_factory.mktemp("published"), "roomy")
    record = latest(run)
    assert record is not None
    return run, record, document.render(run_view(run, record), record)


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
    lines = first.splitlines()
    assert lines[2].startswith(
        "**No-promote.** smollm2-135m-gpu-roomy changes speculation method=ngram-mod, "
        "draft_tokens=16 against its control"
    )
    for needle in (
        "Role: this decision gates `demo-chat-gpu` (no house repository given",
        "- GPU: 1 x NVIDIA H200 (143,771 MiB each); driver, CUDA, interconnect not in this "
        "run's telemetry",
        "- Engine: llama.cpp build b0-unknown",
        "decode 735.9 tok/s against 763.6 tok/s (median of 3 run-level values); the change's "
        "effect: -2.6% (95% interval",
        "- A/B E2E p50: 145 ms vs 188 ms",
        "- context reached: cold 1,017 passed of 7,937 sent",
        "- minimum free VRAM: GPU 0 141,687 MiB (pass) against a 3,072 MiB reserve",
        "Next step: ",
        "Exit condition: a fresh run of smollm2-135m-gpu-roomy",
    ):
        assert needle in first, needle
    blocking = [g.key for g in record.evaluation.gates if g.status in ("blocks", "vetoes")]
    assert len(blocking) == 11
    causes = [x for x in lines if re.match(r"^\d+\. \*\*", x)]
    assert 1 <= len(causes) < len(blocking)
    assert all("([evidence](../../" in x for x in causes)
    rest = text.split("## All blocking gates, by cause", 1)[1].split("\n## ", 1)[0]
    for key in blocking:
        assert rest.count(f"[`{key}`](../../") == 1, key


def test_a_clean_run_says_nothing_blocks(tmp_path: Path) -> None:
    """With every blocking gate removed from the record, the first screen says so plainly."""
    run = contract_run.build(tmp_path)
    record = preview(run, setup(None))
    ev = record.evaluation.model_copy(update={"reasons": [], "missing": []})
    for g in ev.gates:
        g.status, g.verdict = "pass", Verdict.PASS
    record = record.model_copy(update={"evaluation": ev, "decision": "promote"})
    text = document.render(run_view(run, record), record)
    assert "Nothing blocks." in _first_screen(text)
    assert "The answer holds for the recipe as pinned" in text


def _links_resolve(run: RunDir, record: DecisionRecord, text: str) -> list[Path]:
    here = run.path / attempt_rel(record.attempt)
    found = []
    for target in LINK.findall(text):
        if target.startswith("#"):
            continue
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
    here = run.path / attempt_rel(record.attempt)
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
    """Every failing gate is named; no reason is written twice, and a reason many gates share
    is written once, for its cause."""
    _, record, text = roomy
    bad = [g for g in record.evaluation.gates if g.verdict is not Verdict.PASS]
    assert bad
    for g in bad:
        assert f"`{g.key}`" in text, g.key
        said = wording.reason_parts(g)[1]
        assert text.count(said) <= 1, said
        for r in g.reasons:
            assert text.count(r) <= 1, r
    said = [wording.reason_parts(g)[1] for g in bad]
    assert len(set(said)) < len(said)  # the run repeats a failure: it is still written once


def test_no_table_cell_is_long(roomy: tuple[RunDir, DecisionRecord, str], tmp_path: Path) -> None:
    run = contract_run.build(tmp_path)
    for text in (roomy[2], document.render(run_view(run, rec := preview(run, setup(None))), rec)):
        cells = _cells(text)
        assert cells and max(len(c) for c in cells) <= CELL_BOUND


def test_a_long_reason_is_one_short_line() -> None:
    assert wording.short("a\nb " * 200, 50).endswith("…")
    assert len(wording.short("x" * 500, 50)) == 50
    assert "\n" not in wording.short("a\nb")
    # quoted markup shows when rendered instead of vanishing as an HTML tag
    assert wording.short("echoes ['<tool_response>']") == "echoes ['&lt;tool_response>']"


def test_plots_show_the_figures_of_the_tables(roomy: tuple[RunDir, DecisionRecord, str]) -> None:
    run, record, text = roomy
    view = run_view(run, record)
    by_name = {p.name: p for p in plots.plan(run, view.records(), view.stages)}
    data = {
        s: json.loads((run.path / s / "attempt-001" / "result.json").read_text())["data"]
        for s in ("context", "ab", "vram")
    }
    ladder = by_name["context-ladder.png"]
    cold = [r for r in data["context"]["rows"] if r["pass"] == "cold"]
    assert ladder.panels[0].series["cold"] == sorted(
        (float(r["actual_prompt_tokens"]), r["ttft_s"]) for r in cold
    )
    side = [x for x in text.split("## Context", 1)[1].splitlines() if x.startswith("| ")][2:]
    cells = [[c.strip() for c in row.strip("|").split("|")] for row in side]
    for x, y in ladder.panels[1].series["warm"]:
        assert any(c[5].endswith(f" of {x:,.0f}") and c[8] == f"{y:,.1f} tok/s" for c in cells), (
            x,
            y,
        )
    acc = by_name["acceptance-by-position.png"].panels[0].series["acceptance"]
    assert [y for _, y in acc] == data["ab"]["acceptance"]["per_position"]
    vram = by_name["vram-series.png"]
    card = data["vram"]["cards"][0]
    lowest = min(s["min_free_mib"] for s in card["stages"].values())
    reserve = data["vram"]["reserve_gib"] * 1024
    assert min(y for _, y in vram.panels[0].series["GPU 0"]) == lowest - reserve  # headroom
    assert vram.panels[0].hlines["reserve"] == 0.0 and vram.panels[0].zoom
    assert f"{lowest - reserve:,.0f} MiB above the {reserve:,.0f} MiB reserve" in str(
        vram.panels[0].note
    )
    ab = by_name["ab-distributions.png"]
    lane = data["ab"]["lanes"]["candidate"]
    per_request = [
        q["decode_tok_s"]
        for r in lane["runs"]
        for q in r["requests"]
        if not (q.get("failed") or q.get("excluded") or q.get("degenerate"))
    ]
    pts = ab.panels[0].series[lane["name"]]
    assert sorted(y for _, y in pts) == sorted(per_request)
    assert len({x for x, _ in pts}) > 1 and all(-0.2 < x < 0.2 for x, _ in pts)  # jittered
    assert ab.panels[0].medians[lane["name"]][1] == pytest.approx(
        sorted(per_request)[len(per_request) // 2]
    )
    assert by_name["capacity-aggregate.png"].empty
    assert "Capacity: not run (not listed in stages.run)." in text
    for p in by_name.values():
        assert (f"]({p.name})" in text) is (not p.empty)


def test_capacity_plot_points_are_the_matrix() -> None:
    matrix = [
        MatrixRow(cell=f"256-c{c}", length=256, concurrency=c, aggregate_output_tok_s=v)
        for c, v in ((1, 30.0), (2, 55.5), (4, None))
    ]
    plot = capacity_section.aggregate_plot(CapacityRecord(matrix=matrix))
    assert plot.panels[0].series == {"candidate 256 tok": [(1.0, 30.0), (2.0, 55.5)]}
    assert plots.draw(plot).startswith(b"\x89PNG")


def test_no_data_no_plot() -> None:
    plan = plots.plan(RunDir(Path("/nonexistent/x/y")), {})
    assert all(p.empty for p in plan)
    assert plots.drawn(RunView(RunDir(Path("/nonexistent/x/y")), Listing())) == []


def test_many_blocking_gates_come_down_to_their_causes(
    roomy3: tuple[RunDir, DecisionRecord, str],
) -> None:
    """The published H200 roomy run blocks on 65 gates: the first screen groups them into 8
    causes, each tagged against the control with its evidence (a gate the control did not run
    at that level: not compared), the candidate's own change first; every gate is listed once
    below with its link."""
    run, record, text = roomy3
    first = _first_screen(text)
    assert len(first.splitlines()) < 40
    blocking = [g for g in record.evaluation.gates if g.status in ("blocks", "vetoes")]
    assert len(blocking) == 65
    causes = [x for x in first.splitlines() if re.match(r"^\d+\. \*\*", x)]
    assert len(causes) == 8
    assert causes[0].startswith("1. **differs from the control**: the change is slower")
    assert "`ab/decode`, `ab/spec-speedup`" in causes[0]
    same = next(x for x in causes if "cannot call tools" in x and "**same on" in x)
    assert same.split(": ", 1)[0].endswith("**same on the control**")
    assert "(38: " in same and "@think" not in same
    # the control ran its preflight at `off` only: at `think` nothing compared the lanes
    alone = next(x for x in causes if "cannot call tools" in x and "**not compared" in x)
    assert "(15: `preflight/responses@think`" in alone and "@off" not in alone
    assert "identity/pin@revision" in text.split("## All blocking gates, by cause", 1)[1]
    head = first.splitlines()[:15]
    assert any(
        x.startswith("Next step: make the change (speculation method=ngram-mod") for x in head
    )
    exit_line = next(x for x in first.splitlines() if x.startswith("Exit condition: "))
    assert "(1) make the change" in exit_line and "gate(s)" not in exit_line
    rest = text.split("## All blocking gates, by cause", 1)[1].split("\n## ", 1)[0]
    for g in blocking:
        assert rest.count(f"[`{g.key}`](../../") == 1, g.key
    _links_resolve(run, record, text)


def test_a_run_that_never_started_is_not_qualified(tmp_path: Path) -> None:
    """Every stage aborted on a start-up crash, no gate judged: the title and the first line
    say "not qualified" with the signal, the cause is written once, the server's last log
    lines are quoted and its log is linked (not run.json); the record stays no-promote so no
    alias moves."""
    run = contract_run.build_crashed(tmp_path)
    record = preview(run, setup(None))
    assert record.decision == "no-promote"
    cause = "the candidate server crashed during start-up (SIGSEGV)"
    assert record.headline == f"not qualified: {cause}"
    text = document.render(run_view(run, record), record)
    lines = text.splitlines()
    assert lines[0] == f"# smollm2-135m-ngram: **not qualified: {cause}**"
    assert lines[2].startswith(f"**Not qualified: {cause}.**")
    assert "no-promote decision" not in text and "**no-promote**" not in text
    assert text.count("crashed during start-up") == 3  # title, first line, closing paragraph
    for quoted in contract_run.CRASH_LOG[-2:]:
        assert f"\n{quoted}\n" in text, quoted
    log = "server-candidate/attempt-001/stderr.000.log"
    assert f"([server log](../../{log}))" in text
    assert "](../../run.json)" not in text
    assert "identity (aborted), preflight (not run)" in text
    _links_resolve(run, record, text)


def test_the_not_qualified_headline_is_what_verify_derives(tmp_path: Path) -> None:
    """The headline comes from the evidence alone (derive), so verify compares it."""
    from qualify.decision.derive import comparable

    run = contract_run.build_crashed(tmp_path)
    a, b = preview(run, setup(None)), preview(run, setup(None))
    assert comparable(a)["headline"] == comparable(b)["headline"] == a.headline


# -- each figure read back from the evidence (the published roomy run) --


def _data(run: RunDir, stage: str) -> dict[str, Any]:
    path = run.path / stage / "attempt-001" / "result.json"
    return dict(json.loads(path.read_text())["data"])


def test_acceptance_is_accepted_tokens_per_draft_with_the_drafts(
    roomy3: tuple[RunDir, DecisionRecord, str],
) -> None:
    """Accepted tokens per draft is accepted / drafts (the bonus token not counted), and the
    number of drafts is printed beside it."""
    run, _, text = roomy3
    acc = _data(run, "ab")["acceptance"]
    per = acc["accepted"] / acc["drafts"]
    assert f"{per:.1f} accepted tokens per draft over {acc['drafts']} drafts" in text
    assert f"({acc['mean_length']:.1f} counting the bonus token)" in text
    assert f"{acc['mean_length']:.2f} tokens per draft" not in text


def test_each_lane_figure_says_how_many_runs_it_is_the_median_of(
    roomy3: tuple[RunDir, DecisionRecord, str],
) -> None:
    run, _, text = roomy3
    rows = {m["metric"]: m for m in _data(run, "ab")["metrics"]}
    n = rows["aggregate_output_tok_s"]["runs"]["candidate"]
    line = next(x for x in text.splitlines() if x.startswith("| Aggregate output |"))
    assert f"| {n} run-level value{'s' if n != 1 else ''} |" in line, line
    assert "too few samples" in line


def test_the_quality_budget_is_the_one_sent(roomy3: tuple[RunDir, DecisionRecord, str]) -> None:
    run, _, text = roomy3
    b = next(x for x in _data(run, "quality")["budgets"] if x["task"] == "timeout-triage")
    sent = f"{b['visible_budget']} + {b['reasoning_budget']} = {b['max_tokens']}"
    declared = f"(declared {b['visible_tokens']:,} / {b['reasoning_tokens']:,})"
    line = next(x for x in text.splitlines() if x.startswith("| timeout-triage |"))
    assert f"{sent} {declared}" in line, line


def test_engine_concurrency_at_full_context_is_read(
    roomy3: tuple[RunDir, DecisionRecord, str],
) -> None:
    run, _, text = roomy3
    n = _data(run, "capacity")["engine"]["max_concurrency_at_full_context"]
    assert f"{n:,.0f} full-context requests at once" in text
    assert "no data full-context" not in text


def test_fidelity_names_every_failing_gate_and_the_signed_chunk_error(
    roomy3: tuple[RunDir, DecisionRecord, str],
) -> None:
    run, record, text = roomy3
    failing = [
        g.key for g in record.evaluation.gates if "fidelity" in g.gate and g.verdict.value != "pass"
    ]
    assert failing
    head = next(x for x in _first_screen(text).splitlines() if x.startswith("- fidelity"))
    for key in failing:
        assert f"`{key}` fail" in head, key
    lanes = _data(run, "ab")["fidelity"]["lanes"]
    worst = min(lanes, key=lambda k: -abs(lanes[k]["chunk_counting_error_pct"]))
    assert f"{lanes[worst]['chunk_counting_error_pct']:+.2f}% ({worst})" in text


def test_the_reserve_is_the_policy_and_the_result_is_stated_apart(tmp_path: Path) -> None:
    """The VRAM section states the policy and the result; the tight run fails on its card."""
    run = _published(tmp_path, "tight")
    record = latest(run)
    assert record is not None
    text = document.render(run_view(run, record), record)
    line = next(x for x in text.splitlines() if x.startswith("nvml sampler"))
    assert "Policy: every card keeps 3.0 GiB free at every stage; result: fails" in line
    assert "pass on every card" not in line


def test_a_cached_warm_prompt_shows_no_prefill_rate(
    roomy3: tuple[RunDir, DecisionRecord, str],
) -> None:
    run, _, text = roomy3
    warm = [r for r in _data(run, "context")["rows"] if r["pass"] == "warm"]
    top = max(warm, key=lambda r: r["actual_prompt_tokens"])
    row = next(x for x in text.splitlines() if x.startswith("| 16,384 -> 7,936 |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[5] == f"{top['cached_tokens']:,} of {top['actual_prompt_tokens']:,}"
    assert cells[7] == "n/a (100% cached)"
    assert f"{top['effective_prefill_tok_s']:,.0f} tok/s" not in text
    assert "16,384 -> 7,936" in text  # the clamp, in the target column


def test_the_ab_interval_is_over_paired_requests(
    roomy3: tuple[RunDir, DecisionRecord, str],
) -> None:
    """The printed interval is the bootstrap over prompts of paired per-request differences,
    computed from the per-request timings, with the number of pairs and prompts."""
    from qualify.ab.record import Record
    from qualify.ab.stats import paired_summary
    from qualify.ab.table import pairs

    run, _, text = roomy3
    ab = _data(run, "ab")
    lanes = Record.model_validate(ab).lanes
    got = paired_summary(
        pairs(lanes["candidate"].runs, lanes["control"].runs, "decode_tok_s"),
        ab["settings"]["bootstrap_resamples"],
        ab["settings"]["seed"],
    ).model_dump()
    lo, hi = got["ci95_pct"]
    assert got["pairs"] == 25 and got["prompts"] == 9
    want = (
        f"{got['median_pct']:+.1f}% (95% interval {lo:+.1f}% to {hi:+.1f}%, 25 pairs over 9 "
        "prompts)"
    )
    assert want in text


def test_no_interval_is_wider_than_its_quantity_unnamed(
    roomy3: tuple[RunDir, DecisionRecord, str],
) -> None:
    for text in (roomy3[2],):
        for lo, hi in re.findall(r"95% interval ([-+][\d.,]+)% to ([-+][\d.,]+)%", text):
            a, b = float(lo.replace(",", "")), float(hi.replace(",", ""))
            assert b - a <= 100 or a > 0 or b < 0, (a, b)


@pytest.mark.parametrize("kind", ["roomy", "tight"])
def test_the_published_copy_is_the_signed_document_and_its_links_work(
    kind: str, tmp_path: Path
) -> None:
    """docs/gpu/<kind>/ holds the signed decision (attempt 2, re-decided from the recorded
    evidence under the recorded house rules) with every file it links at its place in the
    run: each link resolves where it is published, each linked file is the recorded one, and
    the envelope verifies once the attempt is put back into the recorded run."""
    from qualify.decision.verify import verify
    from qualify.evidence.signing import load_public

    published = ROOT / "docs" / "gpu" / kind
    (doc,) = published.glob("*/decision/attempt-002/decision.md")
    run = _published(tmp_path, kind)
    here = doc.parent
    for target in LINK.findall(doc.read_text()):
        if target.startswith("#"):
            continue
        path = (here / target).resolve()
        assert path.is_file(), target
        rel = path.relative_to(doc.parents[2].resolve()).as_posix()
        if not rel.startswith("decision/attempt-002/"):  # evidence: the recorded bytes
            assert path.read_bytes() == (run.path / rel).read_bytes(), rel
    shutil.copytree(here, run.path / "decision" / "attempt-002")
    shutil.copyfile(
        here.with_name("attempt-002.dsse.json"), run.path / "decision/attempt-002.dsse.json"
    )
    report = verify(
        run.path / "decision/attempt-002.dsse.json",
        load_public(ROOT / "docs/gpu/roomy/decision-2.pub"),
    )
    assert report.ok, report.problems
    signed = json.loads((here / "statement.json").read_text())
    digest = next(
        s["digest"]["sha256"]
        for s in signed["subject"]
        if s["name"].endswith("attempt-002/decision.md")
    )
    assert hashlib.sha256(doc.read_bytes()).hexdigest() == digest


def test_a_warm_prompt_whose_cache_hit_is_unreported_shows_no_prefill_rate() -> None:
    """A warm repeat on a server that reports no cached tokens: prompt tokens over TTFO would
    count tokens the cache may have served, so no rate is shown; a cold row keeps its rate."""
    from qualify.context.record import Row
    from qualify.context.section import prefill_note

    base = {"target": 8192, "content": "haystack", "concurrency": 1, "planned_tokens": 7936}
    warm = Row.model_validate(base | {"pass": "warm", "actual_prompt_tokens": 7936})
    assert prefill_note(warm) == "n/a (warm; cached tokens unreported)"
    cold = Row.model_validate(base | {"pass": "cold", "actual_prompt_tokens": 7936})
    assert prefill_note(cold) is None
    half = warm.model_copy(update={"cached_tokens": 3968})
    assert prefill_note(half) == "n/a (50% cached)"
