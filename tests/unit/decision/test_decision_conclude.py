"""Concluding a run: tickets for blocking gates, evidence integrity, keys checked first."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import house_run as h
import pytest

from qualify.decision.conclude import conclude, setup, signer
from qualify.errors import BadInput
from qualify.evidence.store import RunDir
from qualify.records import Verdict


@pytest.fixture(autouse=True)
def _tickets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QUALIFY_TICKETS", str(tmp_path / "tickets"))


def test_an_inconclusive_gate_opens_a_ticket(tmp_path: Path) -> None:
    """A required gate that blocks opens a ticket whose acceptance names the policy digest."""
    house = h.make_house(tmp_path)
    run, _ = h.make_run(tmp_path, h.candidate(tmp_path), Verdict.INCONCLUSIVE)
    rec = conclude(run, setup(house))
    assert rec.decision == "no-promote"
    (ticket,) = rec.tickets
    assert (ticket.gate, ticket.action) == ("vram/telemetry", "opened")


def test_a_second_decision_appends_to_the_open_ticket(tmp_path: Path) -> None:
    """Two runs failing the same gate log two attempts in one ticket."""
    house = h.make_house(tmp_path)
    run1, _ = h.make_run(tmp_path / "a", h.candidate(tmp_path), Verdict.FAIL)
    run2 = RunDir(run1.path.with_name("20260101T000000Z-000002"))
    shutil.copytree(run1.path, run2.path)
    info = json.loads((run2.path / "run.json").read_text()) | {"run_id": run2.run_id}
    (run2.path / "run.json").chmod(0o644)
    (run2.path / "run.json").write_text(json.dumps(info))
    t1 = conclude(run1, setup(house)).tickets[0]
    t2 = conclude(run2, setup(house)).tickets[0]
    assert t1.id == t2.id and (t2.action, t2.attempts) == ("appended", 2)


def test_evidence_changed_before_the_decision_is_no_promote(tmp_path: Path) -> None:
    """A sealed file that no longer matches its manifest makes the decision no-promote."""
    house = h.make_house(tmp_path)
    run, _ = h.make_run(tmp_path, h.candidate(tmp_path), Verdict.PASS)
    assert conclude(run, setup(house)).decision == "promote"
    result = run.path / "identity" / "attempt-001" / "result.json"
    result.write_text(result.read_text().replace('"model"', '"modal"'))
    rec = conclude(run, setup(house))
    assert rec.decision == "no-promote"
    assert rec.integrity == ["identity/attempt-001/result.json: differs from its manifest"]


def test_a_bad_key_is_refused_before_anything_runs(tmp_path: Path) -> None:
    """A key that cannot be read, or one kept inside the evidence root, is bad input."""
    with pytest.raises(BadInput):
        signer(tmp_path / "absent.key", None, tmp_path / "ev")
    key, _ = h.keypair(tmp_path / "ev", "inside")
    with pytest.raises(BadInput, match="inside the evidence root"):
        signer(key, None, tmp_path / "ev")
