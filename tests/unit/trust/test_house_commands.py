"""`house pin` and `house show` refuse a dirty or inconsistent house; `sign` yields a promote
that can move an alias and refuses to pretend it signed; `tickets waive` renews a waiver."""

from __future__ import annotations

import json
from pathlib import Path

import git
import house_run as h
import pytest
from trust_helpers import alias_set

from qualify.cli import main
from qualify.records import Verdict
from qualify.trust.repository import TRUST_LOG, entry_hash


def pin_cli(house: Path, pub: Path, name: str) -> int:
    return main(
        ["house", "pin", "decision", str(pub), "--name", name, "--why", "w", "--house", str(house)]
    )


def test_pin_refuses_an_uncommitted_hand_made_entry(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A trust-log entry appended by hand and not committed: `house pin` refuses, naming it,
    and commits nothing (the entry is never committed along with a legitimate pin)."""
    house, _ci = h.pinned_house(tmp_path)
    mine = h.keypair(tmp_path, "mine")
    log = house / TRUST_LOG
    last = json.loads(log.read_text().splitlines()[-1])
    extra = {**last, "seq": last["seq"] + 1, "name": "mine", "prev": last["hash"]}
    extra["pem"] = mine[1].read_text()
    extra["hash"] = entry_hash(extra)
    log.write_text(log.read_text() + json.dumps(extra, sort_keys=True) + "\n")
    head = git.Repo(house).head.commit.hexsha
    assert pin_cli(house, h.keypair(tmp_path, "bob")[1], "bob") == 1
    assert "trust/trust.log.jsonl" in capsys.readouterr().err
    assert git.Repo(house).head.commit.hexsha == head


def test_pin_refuses_an_untracked_key_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    house, _ci = h.pinned_house(tmp_path)
    (house / "trust/decision/mine.pub").write_bytes(h.keypair(tmp_path, "mine")[1].read_bytes())
    assert pin_cli(house, h.keypair(tmp_path, "bob")[1], "bob") == 1
    assert "trust/decision/mine.pub" in capsys.readouterr().err


def test_show_refuses_a_committed_key_file_the_log_does_not_pin(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    house, _ci = h.pinned_house(tmp_path)
    (house / "trust/decision/mine.pub").write_bytes(h.keypair(tmp_path, "mine")[1].read_bytes())
    repo = git.Repo(house)
    repo.git.add("trust/decision/mine.pub")
    repo.git.commit("-m", "a key by hand")
    assert main(["house", "show", "--house", str(house)]) == 1
    assert "the trust log pins no such key" in capsys.readouterr().err
    assert pin_cli(house, h.keypair(tmp_path, "bob")[1], "bob") == 1


def test_house_commands_need_an_explicit_house(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    house, _ci = h.pinned_house(tmp_path)
    monkeypatch.chdir(house)
    assert main(["house", "show"]) == 2
    pub = str(h.keypair(tmp_path, "b")[1])
    assert main(["house", "pin", "decision", pub, "--name", "b", "--why", "w"]) == 2
    assert "no house repository given" in capsys.readouterr().err


def test_diff_takes_keys_and_the_alias_table_only_from_an_explicit_house(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Inside a house, with neither --key nor --house: the current directory's repository is
    not taken for the house whose keys verify the runs or whose alias table names A."""
    run, _env, house, ci, _cand = h.decided(tmp_path)
    monkeypatch.chdir(house)
    assert main(["diff", str(run.path), str(run.path)]) == 2
    assert "no house repository given" in capsys.readouterr().err
    argv = ["diff", str(run.path), "--against-alias", "demo-chat", "--key", str(ci[1])]
    assert main(argv) == 2
    assert "no house repository given" in capsys.readouterr().err


def test_a_run_signed_later_can_move_its_alias(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run finished without a key, signed afterwards with `qualify sign`: the promote signs
    the in-run candidate copy, and `alias set` accepts it."""
    house, ci = h.pinned_house(tmp_path)
    cand = h.candidate(tmp_path)
    run, inv = h.make_run(tmp_path, cand, Verdict.PASS)
    inv.write_json("outcome.json", {"exit_code": 0})
    inv.seal()
    assert main(["sign", str(run.path), "--key", str(ci[0]), "--house", str(house)]) == 0
    env = run.path / "decision/attempt-001.dsse.json"
    assert "promote" in capsys.readouterr().out and env.is_file()
    assert alias_set(cand, env, house) == 0, capsys.readouterr().err


def test_sign_with_another_key_signs_nothing_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run, env, house, _ci, _cand = h.decided(tmp_path)
    before = env.read_bytes()
    other = h.keypair(tmp_path, "other")
    assert main(["sign", str(run.path), "--key", str(other[0]), "--house", str(house)]) == 2
    err = capsys.readouterr().err
    assert "already signed" in err and "nothing was signed now" in err
    assert env.read_bytes() == before


def test_a_waiver_can_be_renewed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run, _env, house, _ci, _cand = h.decided(tmp_path, vram=Verdict.INCONCLUSIVE)
    alice = h.keypair(tmp_path, "alice")
    h.pin_waiver(house, alice[1], "alice")
    record = json.loads((run.path / "decision/attempt-001/decision.json").read_text())
    (ticket,) = [t["id"] for t in record["tickets"] if t["gate"] == "vram/telemetry"]
    argv = ["tickets", "waive", ticket, "--reason", "r", "--key", str(alice[0])]
    argv += ["--run", str(run.path), "--house", str(house), "--dir", str(tmp_path / "tickets")]
    assert main(argv) == 0
    assert main(argv) == 0, capsys.readouterr().err
    assert "a renewal" in capsys.readouterr().out
    files = sorted(p.name for p in (house / "waivers/smollm2-135m-ngram").iterdir())
    assert files == [f"{ticket}.dsse.json", f"{ticket}.renewal-2.dsse.json"]
    assert not git.Repo(house).is_dirty(untracked_files=True)
