"""`verify` checks that the run is exactly what was sealed: nothing added anywhere, no link in
place of a file or a directory, every path it reads a signed file inside the run, and every
failure a refusal with a message."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import house_run as h
import pytest
from trust_helpers import alias_set, resign, writable

from qualify.cli import main
from qualify.decision.verify import verify
from qualify.evidence.signing import load_public


def refused(env: Path, pub: Path, says: str) -> list[str]:
    report = verify(env, load_public(pub))
    assert not report.ok and any(says in p for p in report.problems), report.problems
    return report.problems


@pytest.mark.parametrize(
    "where", ["identity/attempt-001/sub/extra.json", "identity/extra.json", "extra.json"]
)
def test_a_file_added_anywhere_is_refused(tmp_path: Path, where: str) -> None:
    run, env, _house, ci, _cand = h.decided(tmp_path)
    target = run.path / where
    writable(target.parent) if target.parent.exists() else None
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("{}")
    refused(env, ci[1], f"{where}: a file this decision did not seal")


def test_an_empty_directory_added_is_refused(tmp_path: Path) -> None:
    run, env, _house, ci, _cand = h.decided(tmp_path)
    (run.path / "later").mkdir()
    refused(env, ci[1], "later: a directory this decision did not seal")


def test_a_file_replaced_by_a_link_to_an_identical_copy_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run, env, house, ci, cand = h.decided(tmp_path)
    f = run.path / "identity/attempt-001/result.json"
    outside = tmp_path / "outside.json"
    shutil.copy(f, outside)
    writable(f.parent)
    f.unlink()
    f.symlink_to(outside)
    refused(env, ci[1], "identity/attempt-001/result.json: a symbolic link")
    assert alias_set(cand, env, house) == 1
    assert "a symbolic link" in capsys.readouterr().err


def test_an_attempt_replaced_by_a_link_hides_nothing(tmp_path: Path) -> None:
    """A whole attempt directory replaced by a link to an identical copy, with a file added
    inside the copy: the link is named (and nothing under it is trusted)."""
    run, env, _house, ci, _cand = h.decided(tmp_path)
    d = run.path / "vram/attempt-001"
    outside = tmp_path / "copy-of-attempt"
    shutil.copytree(d, outside)
    writable(outside)
    (outside / "hidden.json").write_text("{}")
    writable(d)
    shutil.rmtree(d)
    os.symlink(outside, d)
    refused(env, ci[1], "vram/attempt-001: a symbolic link")


def _forged(tmp_path: Path, edit: Any) -> tuple[Path, Path]:
    run, _env, _house, ci, _cand = h.decided(tmp_path)
    return resign(run, ci[0], edit), ci[1]


@pytest.mark.parametrize(
    "field, value, says",
    [
        ("candidate_copy", "../../../outside.toml", "the candidate copy '../../../outside.toml'"),
        ("candidate_copy", "/etc/passwd", "the candidate copy '/etc/passwd'"),
        ("candidate_copy", "run/attempt-001/missing.toml", "not a signed file of the run"),
    ],
)
def test_paths_the_statement_names_are_read_only_inside_the_run(
    tmp_path: Path, field: str, value: str, says: str
) -> None:
    """A holder of the decision key points the candidate copy outside the run (or at nothing):
    a refusal naming it, never a read outside the run or a traceback."""
    (tmp_path / "outside.toml").write_text("anything")

    def edit(rec: dict[str, Any]) -> None:
        rec[field] = value

    env, pub = _forged(tmp_path, edit)
    problems = refused(env, pub, says)
    assert all("Traceback" not in p for p in problems)


def test_a_waiver_copy_outside_the_run_is_refused(tmp_path: Path) -> None:
    def edit(rec: dict[str, Any]) -> None:
        rec["waivers"] = [
            {"path": "waivers/x.dsse.json", "accepted": False, "why": "x", "evidence": "../../w"}
        ]

    env, pub = _forged(tmp_path, edit)
    refused(env, pub, "waiver copy 'decision/attempt-001/../../w': not a signed file")


@pytest.mark.parametrize(
    "change, says",
    [
        (lambda e: e | {"extra": 1}, "it holds fields"),
        (lambda e: e | {"signatures": [e["signatures"][0] | {"keyid": "x" * 64}]}, "keyid"),
        (lambda e: e | {"signatures": e["signatures"] * 2}, "exactly one signature"),
        (lambda e: e, "reformatted"),
    ],
)
def test_the_envelope_is_canonical(tmp_path: Path, change: Any, says: str) -> None:
    """The unsigned parts of the envelope cannot vary: another field, another keyid, a second
    signature, other formatting are refused (so one decision has one envelope)."""
    _run, env, _house, ci, _cand = h.decided(tmp_path)
    data = change(json.loads(env.read_text()))
    env.chmod(0o644)
    env.write_text(json.dumps(data, indent=3))
    problems = refused(env, ci[1], "not a canonical decision envelope")
    assert any(says in p for p in problems) or says == "keyid", problems


def test_a_keyid_other_than_the_signers_is_refused(tmp_path: Path) -> None:
    from qualify.evidence.signing import envelope_bytes

    _run, env, _house, ci, _cand = h.decided(tmp_path)
    data = json.loads(env.read_text())
    data["signatures"][0]["keyid"] = "0" * 64
    env.chmod(0o644)
    env.write_bytes(envelope_bytes(data))
    refused(env, ci[1], "its keyid is not the signer's")


def test_unreadable_input_is_a_message_never_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run, env, _house, ci, _cand = h.decided(tmp_path)
    f = run.path / "run/attempt-001/candidate.toml"
    writable(f.parent)
    f.unlink()
    assert main(["verify", str(env), "--key", str(ci[1])]) == 1
    err = capsys.readouterr().err
    assert "run/attempt-001/candidate.toml: missing" in err and "Traceback" not in err
    env.chmod(0o644)
    env.write_text("not json")
    assert main(["verify", str(env), "--key", str(ci[1])]) == 1
    assert "not a DSSE envelope" in capsys.readouterr().err


def _grow(run_path: Path, what: str) -> None:
    """A whole attempt added after the decision: a copy of attempt 1 of `what`, as attempt 2."""
    shutil.copytree(run_path / what / "attempt-001", run_path / what / "attempt-002")


def test_a_run_grown_after_its_decision_verifies_noted_and_still_backs_its_alias(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A stage run again and a later decision attempt, added after the decision: `verify` notes
    them without refusing; the alias the decision moved still shows and diffs; a file added
    inside a sealed attempt is still refused."""
    run, env, house, ci, cand = h.decided(tmp_path)
    assert alias_set(cand, env, house) == 0, capsys.readouterr().err
    _grow(run.path, "identity")
    _grow(run.path, "decision")
    report = verify(env, load_public(ci[1]))
    assert report.ok, report.problems
    assert "identity/attempt-002: an attempt added after this decision (not sealed by it)" in (
        report.notes
    )
    assert any(n.startswith("decision/attempt-002: an attempt added after") for n in report.notes)
    assert main(["verify", str(env), "--key", str(ci[1])]) == 0
    assert "identity/attempt-002: an attempt added after" in capsys.readouterr().out
    assert main(["alias", "show", "--house", str(house)]) == 0, capsys.readouterr().err
    argv = ["diff", str(run.path), "--against-alias", "demo-chat", "--house", str(house)]
    argv += ["--evidence", str(run.path.parent.parent)]
    assert main(argv) == 0, capsys.readouterr().err
    assert "Result: no regression" in capsys.readouterr().out
    inside = run.path / "identity/attempt-001"
    writable(inside)
    (inside / "late.json").write_text("{}")
    refused(env, ci[1], "identity/attempt-001/late.json: a file this decision did not seal")
