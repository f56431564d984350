"""The alias table is bound to its log: every edit, deletion, reordering or re-hashing of
either, committed or not, is named by `alias show`, `alias history` and `alias set`, which
refuse to read or write on top of it."""

from __future__ import annotations

import json
from pathlib import Path

import git
import house_run as h
import pytest
from trust_helpers import alias_set

from qualify.alias import LOG, state
from qualify.cli import main
from qualify.decision.conclude import setup
from qualify.records import Verdict
from qualify.trust.repository import GENESIS, TABLE, entry_hash


def two_changes(tmp_path: Path) -> tuple[Path, Path, Path, Path]:
    """A house whose alias moved twice (two decisions); returns house, candidate, both envelopes."""
    _run, env, house, ci, cand = h.decided(tmp_path)
    assert alias_set(cand, env, house) == 0
    run2, inv = h.make_run(tmp_path / "second", cand, Verdict.PASS)
    _, env2 = h.decide(run2, inv, setup(house), ci[0])
    assert env2 is not None and alias_set(cand, env2, house) == 0
    return house, cand, env, env2


def commit(house: Path, *paths: str) -> None:
    repo = git.Repo(house)
    repo.git.add("--", *paths)
    repo.git.commit("-m", "by hand", "--", *paths)


def entries(house: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (house / LOG).read_text().splitlines()]


def write_entries(house: Path, es: list[dict[str, object]], rehash: bool) -> None:
    prev = GENESIS
    for n, e in enumerate(es, 1):
        if rehash:
            e["seq"], e["prev"] = n, prev
            e["hash"] = entry_hash(e)
        prev = str(e["hash"])
    (house / LOG).write_text("".join(json.dumps(e, sort_keys=True) + "\n" for e in es))


def refused_everywhere(
    house: Path, cand: Path, env: Path, capsys: pytest.CaptureFixture[str], says: str
) -> None:
    """show, history and set all exit 1 naming the break; set writes and commits nothing."""
    head = git.Repo(house).head.commit.hexsha
    for argv in (["alias", "show"], ["alias", "history"]):
        assert main([*argv, "--house", str(house)]) == 1
        err = capsys.readouterr().err
        assert "not bound to its log" in err and says in err, err
    before = [p.read_bytes() if p.exists() else None for p in (house / TABLE, house / LOG)]
    assert alias_set(cand, env, house) == 1
    err = capsys.readouterr().err
    assert "refused to move an alias" in err and says in err, err
    assert [p.read_bytes() if p.exists() else None for p in (house / TABLE, house / LOG)] == before
    assert git.Repo(house).head.commit.hexsha == head


def test_an_intact_table_and_log_read_clean(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    house, _cand, _env, _env2 = two_changes(tmp_path)
    capsys.readouterr()
    assert main(["alias", "history", "--house", str(house)]) == 0
    assert (
        "chain intact: 2 entries; the table is the one the log derives" in capsys.readouterr().out
    )
    assert main(["alias", "show", "--house", str(house)]) == 0
    assert state(house).problems == []


def test_a_committed_hand_edit_of_the_table_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    house, cand, env, _ = two_changes(tmp_path)
    text = (house / TABLE).read_text()
    (house / TABLE).write_text(text.replace('run_id = "', 'run_id = "X'))
    commit(house, TABLE)
    refused_everywhere(house, cand, env, capsys, "alias demo-chat differs from its log in run_id")


def test_an_alias_added_to_the_table_by_hand_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    house, cand, env, _ = two_changes(tmp_path)
    text = (house / TABLE).read_text()
    (house / TABLE).write_text(text + '\n[aliases."prod-chat"]\ncandidate = "mine"\n')
    commit(house, TABLE)
    refused_everywhere(house, cand, env, capsys, "alias prod-chat is not set by any entry")


def test_an_uncommitted_entry_is_named_and_never_committed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A well-formed extra entry appended by hand, chain intact, table matching: the next
    legitimate `alias set` refuses rather than commit it along."""
    house, cand, env, _ = two_changes(tmp_path)
    es = entries(house)
    extra = dict(es[-1]) | {"alias": "prod-chat", "old": None}
    write_entries(house, [*es, extra], rehash=True)
    refused_everywhere(house, cand, env, capsys, f"{LOG}: changed and not committed")


def test_a_committed_emptied_log_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    house, cand, env, _ = two_changes(tmp_path)
    (house / LOG).write_text("")
    (house / TABLE).write_text((house / TABLE).read_text().split("\n\n")[0] + "\n")
    commit(house, LOG, TABLE)
    assert state(house).aliases == {}
    refused_everywhere(house, cand, env, capsys, "the log was rewritten, emptied or reordered")


def test_a_log_rewritten_with_fresh_hashes_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Entry 1 edited and every hash recomputed, the chain intact: the log no longer extends
    the log an earlier commit holds."""
    house, cand, env, _ = two_changes(tmp_path)
    es = entries(house)
    es[0]["at"] = "2020-01-01T00:00:00Z"
    write_entries(house, es, rehash=True)
    commit(house, LOG)
    refused_everywhere(house, cand, env, capsys, "differs from entry 1 on")


def test_reordered_entries_are_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    house, cand, env, _ = two_changes(tmp_path)
    es = entries(house)
    write_entries(house, [es[1], es[0]], rehash=False)
    commit(house, LOG)
    refused_everywhere(house, cand, env, capsys, "entry 1: sequence number 2, expected 1")


def test_a_deleted_log_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    house, cand, env, _ = two_changes(tmp_path)
    git.Repo(house).git.rm(LOG)
    git.Repo(house).git.commit("-m", "gone")
    refused_everywhere(house, cand, env, capsys, "alias demo-chat is not set by any entry")
