"""Concluding a run: tickets for blocking gates, signed waivers, evidence integrity."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from qualify.decision.conclude import conclude
from qualify.decision.signing import generate
from qualify.decision.waivers import make_waiver
from qualify.evidence.store import RunDir
from qualify.records import GateResult, StageResult, Verdict
from qualify.tickets import TicketStore

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "smollm2" / "candidate.toml"
T = "2026-01-01T00:00:00Z"


def _candidate(tmp_path: Path, policy: str) -> Path:
    text = EXAMPLE.read_text().replace("[policy]\n", f"[policy]\n{policy}\n")
    path = tmp_path / "candidate.toml"
    path.write_text(text)
    return path


def _run(tmp_path: Path, cand: Path, vram: Verdict) -> RunDir:
    """identity passes; vram's telemetry gate has the given verdict."""
    run = RunDir(tmp_path / "ev" / "smollm2-135m-ngram" / "20260101T000000Z-000001")
    run.path.mkdir(parents=True)
    info = {"run_id": run.run_id, "candidate": "smollm2-135m-ngram", "candidate_path": str(cand)}
    info["stages"] = ["identity", "vram"]  # type: ignore[assignment]
    (run.path / "run.json").write_text(json.dumps(info))
    for stage, gate, v in (("identity", "model", Verdict.PASS), ("vram", "telemetry", vram)):
        att = run.new_attempt(stage)
        g = GateResult(
            gate=gate, stage=stage, verdict=v, reasons=[] if v is Verdict.PASS else ["no telemetry"]
        )
        att.write_result(
            StageResult(
                stage=stage,
                attempt=1,
                status="finished",
                verdict=v,
                gates=[g],
                started_at=T,
                ended_at=T,
            )
        )
        att.seal()
    return run


POLICY = 'required = ["identity/*", "vram/*"]\ntickets_dir = "tickets"'


def test_inconclusive_gate_opens_a_ticket_and_a_signed_waiver_promotes(tmp_path: Path) -> None:
    """An inconclusive required gate is no-promote and opens a ticket; a waiver of that ticket,
    signed by a listed key, turns it into waived and the decision promotes, keeping a copy."""
    cand = _candidate(tmp_path, POLICY)
    run = _run(tmp_path, cand, Verdict.INCONCLUSIVE)
    first = conclude(run, None)
    assert first.decision == "no-promote"
    (ticket,) = first.tickets
    assert (ticket.gate, ticket.action) == ("vram/telemetry", "opened")
    key, _ = generate(tmp_path / "keys" / "waiver")
    store = TicketStore(tmp_path / "tickets")
    make_waiver(store, ticket.id, "no GPU on the CPU demo host", key, tmp_path / "w.dsse.json")
    cand.write_text(
        cand.read_text().replace(
            POLICY, POLICY + '\nwaivers = ["w.dsse.json"]\nwaiver_keys = ["keys/waiver.pub"]'
        )
    )
    second = conclude(run, None)
    assert second.decision == "promote", second.evaluation.reasons
    (w,) = second.waivers
    assert w.accepted and w.gate == "vram/telemetry" and w.evidence == "waiver-01.json"
    copy = run.path / "decision" / "attempt-002" / "waiver-01.json"
    assert copy.read_bytes() == (tmp_path / "w.dsse.json").read_bytes()
    md = (run.path / "decision" / "attempt-002" / "decision.md").read_text()
    assert "vram/telemetry: inconclusive, waived by" in md


def test_waiver_by_an_unlisted_key_or_for_a_closed_ticket_is_refused(tmp_path: Path) -> None:
    """A waiver signed by a key the policy does not list, or whose ticket is closed, is listed
    as not accepted and the gate still blocks."""
    cand = _candidate(tmp_path, POLICY)
    run = _run(tmp_path, cand, Verdict.INCONCLUSIVE)
    ticket = conclude(run, None).tickets[0]
    stranger, _ = generate(tmp_path / "keys" / "stranger")
    listed, _ = generate(tmp_path / "keys" / "waiver")
    store = TicketStore(tmp_path / "tickets")
    make_waiver(store, ticket.id, "r", stranger, tmp_path / "a.dsse.json")
    make_waiver(store, ticket.id, "r", listed, tmp_path / "b.dsse.json")
    extra = '\nwaivers = ["a.dsse.json"]\nwaiver_keys = ["keys/waiver.pub"]'
    cand.write_text(cand.read_text().replace(POLICY, POLICY + extra))
    rec = conclude(run, None)
    assert rec.decision == "no-promote" and not rec.waivers[0].accepted
    assert "signature not accepted" in rec.waivers[0].why
    cand.write_text(cand.read_text().replace("a.dsse.json", "b.dsse.json"))
    store.close(ticket.id, "fixed")
    rec = conclude(run, None)
    assert rec.decision == "no-promote" and not rec.waivers[0].accepted
    assert rec.waivers[0].why == f"ticket {ticket.id} is not open"


def test_waiver_does_not_rescue_a_fail(tmp_path: Path) -> None:
    """A valid waiver of a failing gate changes nothing: only inconclusive can be waived."""
    cand = _candidate(tmp_path, POLICY)
    run = _run(tmp_path, cand, Verdict.FAIL)
    ticket = conclude(run, None).tickets[0]
    key, _ = generate(tmp_path / "keys" / "waiver")
    make_waiver(TicketStore(tmp_path / "tickets"), ticket.id, "r", key, tmp_path / "w.dsse.json")
    extra = '\nwaivers = ["w.dsse.json"]\nwaiver_keys = ["keys/waiver.pub"]'
    cand.write_text(cand.read_text().replace(POLICY, POLICY + extra))
    rec = conclude(run, None)
    assert rec.decision == "no-promote" and rec.waivers[0].accepted
    assert rec.evaluation.gates[1].status == "blocks"


def test_a_second_decision_appends_to_the_open_ticket(tmp_path: Path) -> None:
    """Two runs failing the same gate log two attempts in one ticket."""
    cand = _candidate(tmp_path, POLICY)
    run1 = _run(tmp_path / "a", cand, Verdict.FAIL)
    run2 = RunDir(run1.path.with_name("20260101T000000Z-000002"))
    import shutil

    shutil.copytree(run1.path, run2.path)
    info = json.loads((run2.path / "run.json").read_text()) | {"run_id": run2.run_id}
    (run2.path / "run.json").write_text(json.dumps(info))
    t1 = conclude(run1, None).tickets[0]
    t2 = conclude(run2, None).tickets[0]
    assert t1.id == t2.id and (t2.action, t2.attempts) == ("appended", 2)


def test_evidence_changed_before_the_decision_is_no_promote(tmp_path: Path) -> None:
    """A sealed file that no longer matches its manifest makes the decision no-promote."""
    cand = _candidate(tmp_path, 'required = ["identity/*"]\ntickets_dir = "tickets"')
    run = _run(tmp_path, cand, Verdict.PASS)
    result = run.path / "identity" / "attempt-001" / "result.json"
    result.write_text(result.read_text().replace('"model"', '"modal"'))
    rec = conclude(run, None)
    assert rec.decision == "no-promote"
    assert rec.integrity == ["identity/attempt-001/result.json: differs from its manifest"]


def test_a_bad_key_writes_nothing(tmp_path: Path) -> None:
    """A key that cannot be read is bad input before any decision file is written."""
    from qualify.errors import BadInput

    cand = _candidate(tmp_path, POLICY)
    run = _run(tmp_path, cand, Verdict.PASS)
    with pytest.raises(BadInput):
        conclude(run, str(tmp_path / "absent.key"))
    assert not (run.path / "decision").exists()
