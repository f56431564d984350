"""A waiver counts only when it verifies with the key the house pins for its approver; the key a
decision record carries (its `signer_pem`, its `signer_keyid`) is never used."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import house_run as h
import pytest
from trust_helpers import alias_set, resign

from qualify.decision.conclude import setup
from qualify.decision.verify import verify
from qualify.decision.waivers import grant, pinned
from qualify.evidence.signing import keyid, load_public
from qualify.records import Verdict
from qualify.tickets import TicketStore
from qualify.trust.repository import pin, snapshot


def test_a_throwaway_keys_waiver_passed_off_as_the_approvers_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A holder of the pinned decision key decides under a house of their own where a throwaway
    key is pinned as "alice", then rewrites the record so the waiver claims the real alice's
    keyid and re-signs: verify with the real house and alias set refuse it."""
    run, _env, house, ci, cand = h.decided(tmp_path, vram=Verdict.INCONCLUSIVE)
    alice = h.keypair(tmp_path, "alice")
    h.pin_waiver(house, alice[1], "alice")
    mallory = h.keypair(tmp_path, "mallory")
    other = h.make_house(tmp_path / "other")
    pin(other, "decision", ci[1], "ci", "same CI key")
    pin(other, "waiver", mallory[1], "alice", "a throwaway key under alice's name")
    record = json.loads((run.path / "decision/attempt-001/decision.json").read_text())
    (ticket,) = [t for t in record["tickets"] if t["gate"] == "vram/telemetry"]
    bound = {k: record[k] for k in ("candidate_sha256", "policy_sha256")}
    grant(TicketStore(tmp_path / "tickets"), other, ticket["id"], "x", mallory[0], bound, 7)
    run2, inv = h.make_run(tmp_path / "second", cand, Verdict.INCONCLUSIVE)
    rec2, env2 = h.decide(run2, inv, setup(other), ci[0])
    assert rec2.promote and env2 is not None

    def claim_alice(rec: dict[str, Any]) -> None:
        rec["waivers"][0]["signer_keyid"] = keyid(load_public(alice[1]))

    env2 = resign(run2, ci[0], claim_alice)
    snap = snapshot(house)
    report = verify(env2, load_public(ci[1]), approvers=pinned(snap, snap.policy.waivers))
    assert not report.ok
    assert any("no pinned waiver approver key verifies it" in p for p in report.problems)
    assert alias_set(cand, env2, house) == 1
    assert "no pinned waiver approver key verifies it" in capsys.readouterr().err


def test_verify_judges_waivers_with_the_houses_keys(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`qualify verify`: a waived promote verifies with --house (its pinned approver) and not
    without one, saying why."""
    run, _env, house, ci, cand = h.decided(tmp_path, vram=Verdict.INCONCLUSIVE)
    alice = h.keypair(tmp_path, "alice")
    h.pin_waiver(house, alice[1], "alice")
    record = json.loads((run.path / "decision/attempt-001/decision.json").read_text())
    (ticket,) = [t for t in record["tickets"] if t["gate"] == "vram/telemetry"]
    bound = {k: record[k] for k in ("candidate_sha256", "policy_sha256")}
    grant(TicketStore(tmp_path / "tickets"), house, ticket["id"], "x", alice[0], bound, 7)
    run2, inv = h.make_run(tmp_path / "second", cand, Verdict.INCONCLUSIVE)
    _rec, env2 = h.decide(run2, inv, setup(house), ci[0])
    from qualify.cli import main

    assert main(["verify", str(env2), "--house", str(house)]) == 0, capsys.readouterr().err
    assert main(["verify", str(env2), "--key", str(ci[1])]) == 1
    assert "pass --house" in capsys.readouterr().err
