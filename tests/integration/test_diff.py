"""`qualify diff` on two real qualifications of the demo candidate on the local server.

Two lean runs (identity and a one-rung context ladder) under a house whose policy the identity
stage meets, each signed by the key the house pins; the first backs the alias. The diff of the
two verifies both, compares the cells both measured, and exits 0; `--against-alias` finds the
first from the alias table; a doctored copy of the second is refused by verification (exit 2).
`qualify export` of the second agrees with its signed decision (no server run of its own).
"""

from __future__ import annotations

import csv
import json
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import git
import pytest

from qualify.cli import main
from qualify.evidence.signing import generate
from qualify.pipeline import execute
from qualify.present.record import DecisionRecord
from qualify.progress import Progress
from qualify.trust.repository import init, pin

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit" / "export"))
from export_checks import assert_junit_agrees, timed_exchanges

pytestmark = pytest.mark.integration

HOUSE = """\
version = 1
required = ["identity/*"]
critical = ["identity/*"]

[thresholds]
unverifiable_pins = ["revision"]
"""
RUNG = 1024  # the smallest rung that holds the five tasks twice over


@pytest.fixture(autouse=True)
def _tickets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QUALIFY_TICKETS", str(tmp_path / "tickets"))
    monkeypatch.delenv("QUALIFY_HOUSE", raising=False)


def _house(tmp_path: Path, pub: Path) -> Path:
    root = tmp_path / "house"
    init(root)
    (root / "house-policy.toml").write_text(HOUSE)
    git.Repo(root).git.commit("-am", "house: identity is the bar")
    pin(root, "decision", pub, "ci", "the CI runner signs decisions")
    return root


@pytest.fixture(scope="module")
def _made() -> dict[str, object]:
    return {}


@pytest.fixture
def two_runs(
    candidate_factory: Callable[..., Path],
    tmp_path_factory: pytest.TempPathFactory,
    _made: dict[str, object],
) -> tuple[Path, Path, Path, Path, Path]:
    """(run A, run B, the evidence root, the house, the public key): made once."""
    if not _made:
        base = tmp_path_factory.mktemp("diff")
        priv, pub = generate(base / "keys" / "ci")
        house = _house(base, pub)
        cand = candidate_factory(
            "diff",
            stages=["identity", "context"],
            replace={"targets = [1024, 4096]": f"targets = [{RUNG}]"},
        )
        root = base / "evidence"
        runs = []
        for _ in range(2):
            code = execute(cand, root, key=str(priv), progress=Progress(quiet=True), house=house)
            assert code == 0, "the identity-only house promotes the demo candidate"
            new = [p for p in root.glob("*/*") if (p / "run.json").is_file() and p not in runs]
            runs += new
            if len(runs) == 1:
                env = runs[0] / "decision" / "attempt-001.dsse.json"
                args = ["alias", "set", "demo-chat", str(cand), "--decision", str(env)]
                assert main([*args, "--house", str(house)]) == 0
        _made.update(a=runs[0], b=runs[1], root=root, house=house, pub=pub)
    m = _made
    return m["a"], m["b"], m["root"], m["house"], m["pub"]  # type: ignore[return-value]


def test_two_real_runs_compared_cell_by_cell(
    two_runs: tuple[Path, Path, Path, Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    a, b, _, _, pub = two_runs
    out = tmp_path / "diff.json"
    code = main(["diff", str(a), str(b), "--key", str(pub), "--format", "json", "--out", str(out)])
    doc = json.loads(out.read_text())
    assert code == 0, doc["regressions"]
    assert doc["a"]["run_id"] == a.name and doc["b"]["run_id"] == b.name
    assert doc["a"]["verified"] and doc["b"]["verified"]
    assert doc["policy"]["same"] and doc["not_comparable"] == []
    assert doc["a"]["engine"] == "llama.cpp"
    cells = {(f["group"], f["cell"]): f for f in doc["figures"]}
    cold = cells[("context", f"{RUNG} cold prose c=1")]
    assert cold["comparable"], cold
    assert {"ttfo_s", "effective_prefill_tok_s", "needles found"} <= set(cold["measures"])
    ttfo = cold["measures"]["ttfo_s"]
    assert ttfo["a"] > 0 and ttfo["b"] > 0 and ttfo["ci95"] is None, "one reading a side"
    tasks = [f for f in doc["figures"] if f["group"] == "context tasks"]
    assert len(tasks) == 3 and all(f["comparable"] for f in tasks), "warm, cold, alone"
    assert all(len(f["measures"]) == 5 for f in tasks), "one figure per task kind"
    rows = {r["key"]: r for r in doc["gates"]["rows"]}
    assert rows["identity/pin@model"]["change"] == "same"
    assert f"context/deep-typed-tools@{RUNG}" in rows
    assert main(["diff", str(a), str(b), "--key", str(pub)]) == 0
    text = capsys.readouterr().out
    assert "Result: no regression beyond the house's margins (exit 0)" in text
    assert "### context" in text and "### context tasks" in text


def test_against_the_alias_finds_the_qualification_it_points_at(
    two_runs: tuple[Path, Path, Path, Path, Path], tmp_path: Path
) -> None:
    a, b, root, house, _ = two_runs
    out = tmp_path / "alias.json"
    args = ["diff", str(b), "--against-alias", "demo-chat", "--house", str(house)]
    code = main([*args, "--evidence", str(root), "--format", "json", "--out", str(out)])
    doc = json.loads(out.read_text())
    assert code == 0 and doc["a"]["run_id"] == a.name and doc["b"]["run_id"] == b.name
    assert main(["diff", str(b), "--against-alias", "nobody", "--house", str(house)]) == 2


def test_a_doctored_real_run_is_refused(
    two_runs: tuple[Path, Path, Path, Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    a, b, _, _, pub = two_runs
    doctored = tmp_path / b.parent.name / b.name
    shutil.copytree(b, doctored)
    result = doctored / "context" / "attempt-001" / "result.json"
    data = json.loads(result.read_text())
    data["data"]["rows"][0]["ttfo_s"] = 0.001  # a faster first token, written in by hand
    result.write_text(json.dumps(data))
    assert main(["diff", str(a), str(doctored), "--key", str(pub)]) == 2
    err = capsys.readouterr().err
    assert "does not verify; nothing is compared" in err
    assert "context/attempt-001/result.json: changed" in err


def test_the_export_of_a_real_run_agrees_with_its_decision(
    two_runs: tuple[Path, Path, Path, Path, Path], tmp_path: Path
) -> None:
    """`qualify export` of run B (made above, no other server run): the JUnit holds one case per
    gate with the signed record's verdict, requests.csv a row per timed context request."""
    _, b, _, _, pub = two_runs
    out = tmp_path / "export"
    args = ["export", str(b), "--key", str(pub), "--junit", str(out / "junit.xml")]
    assert main([*args, "--csv", str(out)]) == 0
    record = DecisionRecord.model_validate_json(
        (b / "decision/attempt-001/decision.json").read_bytes()
    )
    cases = assert_junit_agrees(out / "junit.xml", record)
    assert f"context/needles@{RUNG}" in cases and "identity/pin@model" in cases
    with (out / "requests.csv").open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    kept = timed_exchanges(b, record)
    assert kept and {r["evidence"] for r in rows} == kept and len(rows) == len(kept)
    assert all(r["stage"] == "context" and r["ttfo_s"] for r in rows)
