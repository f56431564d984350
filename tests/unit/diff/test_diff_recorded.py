"""`qualify diff` on recorded H200 runs: the published roomy and tight runs (docs/gpu), and the
roomy run recorded a day earlier (tests/golden/recorded); verification refuses a doctored run."""

from __future__ import annotations

import json
import shutil
import tarfile
from pathlib import Path
from typing import Any

import pytest

from qualify.cli import main
from qualify.decision.alias_view import alias_view, summary, verified
from qualify.decision.conclude import setup
from qualify.decision.render import preview
from qualify.diff.compare import diff, exit_code
from qualify.diff.report import markdown
from qualify.diff.runs import Side
from qualify.errors import BadInput
from qualify.evidence.signing import load_public
from qualify.evidence.store import RunDir
from qualify.present.reading import run_view
from qualify.present.record import DecisionRecord

ROOT = Path(__file__).resolve().parents[3]
GPU = ROOT / "docs" / "gpu"
KEY = GPU / "gpu.pub"
ROOMY = "evidence/smollm2-135m-gpu-roomy/20261203T075044Z-b0366f"
TIGHT = "evidence/smollm2-135m-gpu-tight/20261203T075242Z-97cfa5"
EARLIER_TGZ = ROOT / "tests" / "golden" / "recorded" / "gpu-roomy-20261202.tgz"
EARLIER = "evidence/smollm2-135m-gpu-roomy/20261202T210104Z-744939"


@pytest.fixture(scope="module")
def unpacked(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("recorded")
    with tarfile.open(GPU / "evidence.tgz") as tgz:
        tgz.extractall(base, filter="data")
    with tarfile.open(EARLIER_TGZ) as tgz:
        tgz.extractall(base, filter="data")
    return base


def _side(label: str, path: Path) -> Side:
    """A recorded run read with the record it signed (no verification: the logic alone)."""
    run = RunDir(path)
    rec = DecisionRecord.model_validate_json(
        (run.path / "decision/attempt-001/decision.json").read_text()
    )
    return Side(label, run_view(run, rec), rec)


def _derived(label: str, path: Path) -> Side:
    """A run recorded by an older version, its record derived again now (as `render` does)."""
    run = RunDir(path)
    rec = preview(run, setup(None))
    return Side(label, run_view(run, rec), rec)


def _figure(doc: dict[str, Any], group: str, cell: str) -> dict[str, Any]:
    return next(f for f in doc["figures"] if f["group"] == group and f["cell"] == cell)


def test_roomy_against_tight_names_the_gates_that_broke_and_the_slower_first_token(
    unpacked: Path,
) -> None:
    """Same engine, card and policy: the tight recipe (256 slots, 141 GiB of KV) breaks the
    reserve and its context pin, and its first token is slower with the whole interval beyond
    the 3% margin; the stages tight did not run are not comparable, saying so."""
    doc = diff(_side("A", unpacked / ROOMY), _side("B", unpacked / TIGHT))
    assert doc["regressed"] and exit_code(doc) == 1
    assert {"vram/reserve@0", "identity/pin@context_length"} <= set(doc["regressions"]["gates"])
    assert "context/degenerate" not in doc["regressions"]["gates"], "advisory: listed, not counted"
    rows = {r["key"]: r for r in doc["gates"]["rows"]}
    assert rows["context/degenerate"]["change"] == "regressed"
    assert rows["ab/decode"]["change"] == "fixed"
    assert all(r["change"] == "removed" for k, r in rows.items() if k.startswith("quality/"))
    ab = _figure(doc, "ab", "candidate lane")
    assert ab["comparable"]
    ttft = ab["measures"]["ttft_s"]
    assert ttft["verdict"] == "regression" and ttft["ci95_pct"][0] > 3.0, ttft
    decode = ab["measures"]["decode_tok_s"]
    assert decode["ci95"] is not None and decode["verdict"] != "regression"
    assert "context_length 8192 -> 25088" in doc["recipe_changes"]
    cap = _figure(doc, "capacity", "256-c1")
    assert not cap["comparable"]
    assert cap["why"] == "measured only in A: the capacity stage did not run in B"
    rung = _figure(doc, "context", "1024 cold prose c=1")
    assert rung["comparable"] and rung["measures"]["ttfo_s"]["ci95"] is None, "one reading"
    assert "one reading" in rung["measures"]["ttfo_s"]["verdict"]
    vram = _figure(doc, "vram", "gpu 0 context")
    assert vram["measures"]["min_free_mib"]["b"] < 3072


def test_the_markdown_reads_in_a_minute(unpacked: Path) -> None:
    """The header, the changed gates only (the rest counted), a table per group of figures,
    and the not-comparable cells folded into one line per reason."""
    text = markdown(diff(_side("A", unpacked / ROOMY), _side("B", unpacked / TIGHT)))
    assert text.startswith("# qualify diff: smollm2-135m-gpu-roomy → smollm2-135m-gpu-tight")
    assert "Result: **regression** (exit 1)" in text
    assert "| vram/reserve@0 | pass | fail: GPU 0 (NVIDIA H200)" in text
    assert "Only in A: capacity: 23 gates; quality: 48 gates." in text
    assert "### ab" in text and "### Not comparable" in text
    assert "- capacity: 256-c1, 256-c2" in text
    assert len(text.splitlines()) < 100, "a screen or two"


def test_one_run_against_itself_shows_no_change(unpacked: Path) -> None:
    """Every figure compared with itself: zero delta, within margin, exit 0."""
    doc = diff(_side("A", unpacked / ROOMY), _side("B", unpacked / ROOMY))
    assert not doc["regressed"] and exit_code(doc) == 0
    assert set(doc["gates"]["counts"]) == {"same"}
    measures = [m for f in doc["figures"] if f["comparable"] for m in f["measures"].values()]
    assert measures and all(m["delta"] in (0, None) for m in measures)
    assert not any(m["verdict"] == "regression" for m in measures)
    assert all(f["comparable"] for f in doc["figures"])


def test_the_same_recipe_a_day_apart(unpacked: Path) -> None:
    """The roomy recipe recorded on 2026-12-02 (16 draft tokens, a 32K slot) and again on
    2026-12-03 (64, 8K): the A/B lane is compared with intervals over three runs each, the
    pins that changed are named, and under two policies no gate change is counted."""
    doc = diff(_derived("A", unpacked / EARLIER), _side("B", unpacked / ROOMY))
    ab = _figure(doc, "ab", "candidate lane")
    assert ab["comparable"] and ab["measures"]["decode_tok_s"]["ci95"] is not None
    assert "speculation.draft_tokens 16 -> 64" in doc["recipe_changes"]
    assert not doc["policy"]["same"] and doc["gates"]["regressions"] == []
    cap = _figure(doc, "capacity", "256-c1")
    assert cap["why"] == "measured only in B: the capacity stage did not run in A"
    s = summary(doc)
    assert s["against"] == "20261202T210104Z-744939"
    assert s["lines"][0].startswith("against smollm2-135m-gpu-roomy (run 20261202T210104Z-744939")
    assert s["regressed"] == doc["regressed"]


def test_published_runs_verify_before_they_are_compared(unpacked: Path) -> None:
    side = verified("A", unpacked / ROOMY, [load_public(KEY)])
    assert side.verified and side.signer
    assert side.envelope == unpacked / ROOMY / "decision" / "attempt-001.dsse.json"
    assert {"identity", "context", "ab", "capacity", "vram"} <= set(side.records)
    assert set(side.records) == set(side.view.stages), "every stage's data reads into its record"


def test_a_doctored_run_is_refused_by_verification(unpacked: Path, tmp_path: Path) -> None:
    """One figure changed in the tight run's context result: verification names the file and
    nothing is compared; the command exits 2."""
    doctored = tmp_path / "tight"
    shutil.copytree(unpacked / TIGHT, doctored)
    result = doctored / "context" / "attempt-001" / "result.json"
    data = json.loads(result.read_text())
    data["data"]["rows"][0]["decode_tok_s"] = 9999.0
    result.write_text(json.dumps(data))
    with pytest.raises(BadInput) as exc:
        verified("B", doctored, [load_public(KEY)])
    assert "does not verify; nothing is compared" in exc.value.headline
    assert any("context/attempt-001/result.json: changed" in p for p in exc.value.problems)
    code = main(["diff", str(unpacked / ROOMY), str(doctored), "--key", str(KEY)])
    assert code == 2


def test_a_run_signed_by_another_key_is_refused(unpacked: Path, tmp_path: Path) -> None:
    """The 2026-12-02 run was signed by a key this checkout does not pin: refused, exit 2."""
    with pytest.raises(BadInput) as exc:
        verified("A", unpacked / EARLIER, [load_public(KEY)])
    assert "not signed by a key given" in exc.value.headline


def test_bad_input_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "run").mkdir()
    assert main(["diff", str(tmp_path / "run"), str(tmp_path / "nope"), "--key", str(KEY)]) == 2
    err = capsys.readouterr().err
    assert "is not a run directory" in err and "RUN: expected a directory holding run.json" in err
    assert main(["diff", str(tmp_path / "run"), "--key", str(KEY)]) == 2
    assert "RUN: expected RUN_A RUN_B" in capsys.readouterr().err


def _alias_house(tmp: Path, run: Path, digest: str | None = None) -> Path:
    from qualify.evidence.store import sha256_file
    from qualify.trust.repository import init, pin

    house = tmp / "house"
    init(house)
    pin(house, "decision", KEY, "gpu", "the GPU session signed the published runs")
    env = run / "decision" / "attempt-001.dsse.json"
    (house / "aliases.toml").write_text(
        'version = 1\n\n[aliases."demo-chat-gpu"]\n'
        f'candidate = "smollm2-135m-gpu-roomy"\nrun_id = "{run.name}"\n'
        f'decision_sha256 = "{digest or sha256_file(env)}"\n'
    )
    return house


def test_the_decision_summary_against_the_alias(unpacked: Path, tmp_path: Path) -> None:
    """A decision of the tight run, its alias pointing at the roomy run: the summary names the
    roomy run, says it regressed, and lists the gates that broke."""
    house = _alias_house(tmp_path, unpacked / ROOMY)
    side = _side("B", unpacked / TIGHT)
    s = alias_view(side.view, side.record, house, unpacked / "evidence").summary
    assert s is not None and s["status"] == "compared", s
    assert s["against"] == "20261203T075044Z-b0366f" and s["regressed"]
    assert "gate vram/reserve@0: pass -> fail" in s["regressions"]


def test_the_decision_summary_when_the_alias_cannot_be_verified(
    unpacked: Path, tmp_path: Path
) -> None:
    house = _alias_house(tmp_path, unpacked / ROOMY, digest="0" * 64)
    side = _side("B", unpacked / TIGHT)
    s = alias_view(side.view, side.record, house, unpacked / "evidence").summary
    assert s is not None
    assert s["status"] == "unusable" and "not under" in s["why"], s
