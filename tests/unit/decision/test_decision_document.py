"""The decision document: golden files, every section from the contract, "not run" with why."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import decision_contract_run as contract_run
import jinja2
import pytest

from qualify.decision import document
from qualify.decision.conclude import setup
from qualify.decision.render import preview, render_run
from qualify.evidence.store import RunDir
from qualify.present.reading import run_view

GOLDEN = Path(__file__).resolve().parents[2] / "golden"
REGEN = os.environ.get("QUALIFY_REGEN_GOLDEN") == "1"


def check_golden(name: str, text: str) -> None:
    """Compare with tests/golden/NAME; regenerated only on purpose (QUALIFY_REGEN_GOLDEN=1)."""
    path = GOLDEN / name
    if REGEN:
        path.write_text(text)
    assert path.is_file(), f"{path} missing: run with QUALIFY_REGEN_GOLDEN=1 once, and review it"
    assert text == path.read_text(), f"{name} changed; if on purpose, regenerate and review"


def _recorded() -> Path:
    runs = [p for p in (GOLDEN / "recorded").glob("*/*") if (p / "run.json").is_file()]
    assert len(runs) == 1, runs
    return runs[0]


def test_recorded_run_renders_its_golden_document(tmp_path: Path) -> None:
    """A run recorded from the real server renders byte for byte as its golden file, from a
    copy of its evidence alone (no server, no tickets directory, no candidate file)."""
    src = _recorded()
    copy = tmp_path / src.parent.name / src.name
    shutil.copytree(src, copy)
    text = render_run(RunDir(copy), setup(None))
    check_golden("decision-recorded.md", text)
    assert render_run(RunDir(copy), setup(None)) == text


def _contract_text(tmp_path: Path) -> str:
    run = contract_run.build(tmp_path)
    record = preview(run, setup(None)).model_copy(
        update={"evidence_root": "e" * 64, "decided_at": "2026-08-01T00:41:00Z"}
    )
    return document.render(run_view(run, record), record)


def test_contract_shaped_run_renders_every_section(tmp_path: Path) -> None:
    """Data shaped as docs/evidence-contract.md fills every section; the golden file holds it."""
    text = _contract_text(tmp_path)
    check_golden("decision-contract.md", text)
    for needle in (
        "| **passed** | 3/3 | 2/3 |",
        "| typed-tools | pass | fail |",
        "| diff-pager | [0/2 (1 wrong, 1 cut)](../../quality/attempt-001/0001-off-diff-pager.json) "
        "| 512 + 4,096 = 4,608 |",
        "| 16,384 -> 7,936 | 7,929 | 7.20 s / 7.22 s | 1,101 tok/s | 71.5 tok/s | 7,872 of 7,929 "
        "| 400 ms / 420 ms | n/a (99% cached) | 71.5 tok/s | 50% found, 99% missed; 50% found, "
        "99% found | fail / pass |",
        "| Per-request decode p50 | 130.7 tok/s | 64.9 tok/s | run-level values (count not "
        "recorded) | +101.4% (of the lane figures: no per-request pairs recorded) |",
        "| E2E p50 | 1.60 s | 3.88 s | run-level values (count not recorded) | -58.8% (of the "
        "lane figures: no per-request pairs recorded) |",
        "| TTFO p50 | 334 ms | 315 ms | run-level values (count not recorded) | +6.0% (of the lane "
        "figures: no per-request pairs recorded, within noise) |",
        "4,865 accepted of 8,830 drafted tokens: 55.1% acceptance, 2.8 accepted tokens per draft "
        "over 1,766 drafts",
        "| context | 1,179 MiB / 240.5 W | 5,031 MiB / 240.5 W | fail on 1 of 2 |",
        "result: fails: context fail on 1 of 2; ab fail on 1 of 2.",
        "identity attempt 1 (aborted): the server exited during the stage",
        "preflight/typed-tools@think (tries 1 fail, 2 fail): the reason of "
        "`preflight/typed-tools@think`, among the blocking causes",
        "control run 2 p3 (reasoning only)",
        "git 1e9c9c34 (dirty)",
        "- GPU: 2 x H200 (143,771 MiB each); driver 580.159.04, CUDA 13.0; interconnect not in "
        "this run's telemetry",
        "- CPU: Intel(R) Xeon(R) Platinum 8480+, 2 cores",
        "## Decision\n\nKeep smollm2-135m-ngram no-promote until a fresh run clears 3 cause(s)",
    ):
        assert needle in text, needle
    assert len(text.splitlines()) < 200


def test_missing_stages_say_not_run_and_why(tmp_path: Path) -> None:
    """Delete two stages' evidence: their sections say "not run" with the reason; nothing fails."""
    run = contract_run.build(tmp_path)
    shutil.rmtree(run.path / "ab")
    shutil.rmtree(run.path / "vram")
    text = render_run(run, setup(None))
    assert "A/B: not run (no attempt was recorded)." in text
    assert "VRAM: not run (no attempt was recorded)." in text
    assert (
        "**harness error**: required stages with no attempt in the evidence (2: `ab/*`, "
        "`vram/*`): required, but no gate matches (ab not run: no attempt was recorded) "
        "([evidence](../../run.json))" in text
    )
    assert "**no-promote**" in text


def test_template_is_strict(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A template naming something the context lacks fails loudly (StrictUndefined)."""
    (tmp_path / "decision.md.j2").write_text("{{ r.no_such_field }}")
    monkeypatch.setenv("QUALIFY_TEMPLATES", str(tmp_path))
    run = contract_run.build(tmp_path / "ev")
    with pytest.raises(jinja2.UndefinedError):
        render_run(run, setup(None))
