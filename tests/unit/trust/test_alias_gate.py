"""What `alias set` asks of a decision besides its signature: an explicit house, the alias the
decision itself names, the candidate read once, a decision young enough and waivers that still
hold, an entry keyed by the signed payload's digest."""

from __future__ import annotations

import base64
import hashlib
import json
import pathlib
from datetime import UTC, datetime, timedelta
from pathlib import Path

import git
import house_run as h
import pytest
from trust_helpers import alias_set

from qualify.alias import LOG, set_alias, state
from qualify.cli import main
from qualify.decision.conclude import setup
from qualify.decision.waivers import grant
from qualify.errors import Refused
from qualify.evidence.signing import read_envelope
from qualify.records import Verdict
from qualify.tickets import TicketStore
from qualify.trust.repository import TABLE


def test_alias_set_needs_an_explicit_house(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run from inside the house repository without --house: exit 2, nothing moved; the
    current directory's git repository is never taken as the house."""
    _run, env, house, _ci, cand = h.decided(tmp_path)
    monkeypatch.chdir(house)
    assert main(["alias", "set", "demo-chat", str(cand), "--decision", str(env)]) == 2
    assert "no house repository given" in capsys.readouterr().err
    assert not (house / TABLE).exists()
    monkeypatch.setenv("QUALIFY_HOUSE", str(house))
    assert main(["alias", "set", "demo-chat", str(cand), "--decision", str(env)]) == 0


def test_a_decision_moves_only_the_alias_it_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _run, env, house, _ci, cand = h.decided(tmp_path)
    assert alias_set(cand, env, house, name="prod-chat") == 1
    assert "gates alias 'demo-chat', not 'prod-chat'" in capsys.readouterr().err
    assert not (house / TABLE).exists()


def test_a_decision_that_names_no_alias_moves_none(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A candidate with no [alias]: its decision says it gates no alias, and it moves none."""
    house, ci = h.pinned_house(tmp_path)
    cand = h.candidate(tmp_path)
    cand.write_text(cand.read_text().replace('[alias]\nname = "demo-chat"\n', ""))
    run, inv = h.make_run(tmp_path, cand, Verdict.PASS)
    record, env = h.decide(run, inv, setup(house), ci[0])
    assert record.promote and env is not None
    assert alias_set(cand, env, house, name="anything") == 1
    assert "names no alias in [alias]" in capsys.readouterr().err
    assert not (house / TABLE).exists()


def test_the_candidate_is_read_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The file swapped between reads (first read: a copy naming prod-chat; later reads: the
    signed bytes) moves nothing: the alias is the signed copy's and the file is read once."""
    _run, env, house, _ci, cand = h.decided(tmp_path)
    signed = cand.read_bytes()
    swapped = signed.replace(b'name = "demo-chat"', b'name = "prod-chat"')
    reads = {"n": 0}
    real_bytes, real_text = Path.read_bytes, Path.read_text

    def first(path: Path) -> bool:
        if path.resolve() != cand.resolve():
            return False
        reads["n"] += 1
        return reads["n"] == 1

    def read_bytes(self: Path) -> bytes:
        return swapped if first(self) else real_bytes(self)

    def read_text(self: Path, *a: object, **k: object) -> str:
        return swapped.decode() if first(self) else real_text(self, *a, **k)  # type: ignore[arg-type]

    monkeypatch.setattr(pathlib.Path, "read_bytes", read_bytes)
    monkeypatch.setattr(pathlib.Path, "read_text", read_text)
    assert alias_set(cand, env, house, name="prod-chat") == 1
    assert "gates alias 'demo-chat', not 'prod-chat'" in capsys.readouterr().err
    reads["n"] = 0
    assert alias_set(cand, env, house, name="demo-chat") == 1
    assert f"{cand} has sha256" in capsys.readouterr().err, "the one read is the one judged"
    assert state(house).aliases == {}


def test_the_log_entry_is_keyed_by_the_signed_payload(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The table names the sha256 of the signed payload; the same decision re-formatted is not
    a new decision: verify refuses the non-canonical envelope and nothing is logged again."""
    _run, env, house, _ci, cand = h.decided(tmp_path)
    assert alias_set(cand, env, house) == 0
    payload = base64.b64decode(read_envelope(env)["payload"])
    target = state(house).aliases["demo-chat"]
    assert target["decision_sha256"] == hashlib.sha256(payload).hexdigest()
    data = read_envelope(env) | {"note": "unsigned"}
    other = env.parent / "attempt-009.dsse.json"
    other.write_text(json.dumps(data, indent=2))
    assert alias_set(cand, other, house) == 1
    assert "not a canonical decision envelope" in capsys.readouterr().err
    assert len((house / LOG).read_text().splitlines()) == 1


def _decided_at(run_dir: Path) -> datetime:
    rec = json.loads((run_dir / "decision/attempt-001/decision.json").read_text())
    return datetime.strptime(rec["decided_at"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)


def test_a_stale_decision_moves_nothing(tmp_path: Path) -> None:
    """Older than the house's aliases.max_decision_age_days (7 by default): refused."""
    run, env, house, _ci, cand = h.decided(tmp_path)
    late = _decided_at(run.path) + timedelta(days=8)
    with pytest.raises(Refused, match="younger than 7 days"):
        set_alias("demo-chat", cand, env, house, now=late)
    h.commit_policy(house, h.HOUSE_POLICY + "\n[aliases]\nmax_decision_age_days = 30\n")
    assert set_alias("demo-chat", cand, env, house, now=late).entry is not None


def _waived(tmp_path: Path) -> tuple[Path, Path, Path, Path, datetime]:
    """A promote that relies on a waiver by a pinned approver (valid 7 days)."""
    run, _env, house, ci, cand = h.decided(tmp_path, vram=Verdict.INCONCLUSIVE)
    alice = h.keypair(tmp_path, "alice")
    h.pin_waiver(house, alice[1], "alice")
    record = json.loads((run.path / "decision/attempt-001/decision.json").read_text())
    (ticket,) = [t for t in record["tickets"] if t["gate"] == "vram/telemetry"]
    bound = {k: record[k] for k in ("candidate_sha256", "policy_sha256")}
    store = TicketStore(tmp_path / "tickets")
    path, _ = grant(store, house, ticket["id"], "no GPU here", alice[0], bound, 7)
    run2, inv = h.make_run(tmp_path / "second", cand, Verdict.INCONCLUSIVE)
    rec2, env2 = h.decide(run2, inv, setup(house), ci[0])
    assert rec2.promote and env2 is not None
    return house, cand, env2, path, _decided_at(run2.path)


def test_a_waiver_expired_by_now_moves_nothing(tmp_path: Path) -> None:
    house, cand, env, _path, at = _waived(tmp_path)
    h.commit_policy(house, h.HOUSE_POLICY + "\n[aliases]\nmax_decision_age_days = 90\n")
    with pytest.raises(Refused, match="does not hold now: it expired at"):
        set_alias("demo-chat", cand, env, house, now=at + timedelta(days=60))
    assert set_alias("demo-chat", cand, env, house, now=at + timedelta(days=1)).entry


def test_a_withdrawn_waiver_moves_nothing(tmp_path: Path) -> None:
    house, cand, env, path, _at = _waived(tmp_path)
    repo = git.Repo(house)
    repo.git.rm(str(path.relative_to(house)))
    repo.git.commit("-m", "withdraw the waiver")
    with pytest.raises(Refused, match="no longer committed"):
        set_alias("demo-chat", cand, env, house)
