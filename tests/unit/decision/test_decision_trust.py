"""A promote that cannot be manufactured: pinned signers, policy binding, a verdict verify
derives again, waivers that mean something, a portable record signed whole."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import git
import house_run as h
import pytest

from qualify.cli import main
from qualify.decision import statement
from qualify.decision.conclude import setup
from qualify.decision.verify import verify
from qualify.decision.waivers import Approver, grant, pinned
from qualify.evidence.signing import envelope_bytes, load_private, load_public, seal_envelope
from qualify.evidence.store import MANIFEST, RunDir, sha256_file
from qualify.records import Verdict
from qualify.tickets import TicketStore
from qualify.trust.house import parse
from qualify.trust.repository import TABLE, snapshot


@pytest.fixture(autouse=True)
def _tickets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QUALIFY_TICKETS", str(tmp_path / "tickets"))
    monkeypatch.delenv("QUALIFY_HOUSE", raising=False)


def approvers(house: Path) -> list[Approver]:
    snap = snapshot(house)
    return pinned(snap, snap.policy.waivers)


def alias_set(cand: Path, env: Path, house: Path, key: Path | None = None) -> int:
    args = ["alias", "set", "demo-chat", str(cand), "--decision", str(env), "--house", str(house)]
    return main(args + (["--key", str(key)] if key else []))


def test_pinned_decision_key_moves_the_alias(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The promote path under a house policy the run meets: the pinned key signed it, the alias
    is set and committed in the house."""
    _run, env, house, _ci, cand = h.decided(tmp_path)
    assert alias_set(cand, env, house) == 0, capsys.readouterr().err
    assert "signed by ci" in capsys.readouterr().out
    assert 'candidate = "smollm2-135m-ngram"' in (house / TABLE).read_text()
    assert git.Repo(house).head.commit.message.startswith("alias demo-chat")


def test_requesters_own_key_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A decision signed by a key the requester made is refused, with or without `--key`, and the
    message says where trust is configured; nothing is written."""
    house, _ = h.pinned_house(tmp_path)
    mine = h.keypair(tmp_path, "mine")
    cand = h.candidate(tmp_path)
    run, inv = h.make_run(tmp_path, cand, Verdict.PASS)
    _, env = h.decide(run, inv, setup(house), mine[0])
    assert env is not None and verify(env, load_public(mine[1])).ok
    assert alias_set(cand, env, house, mine[1]) == 1
    err = capsys.readouterr().err
    assert "is not pinned to sign decisions" in err and "trust/trust.log.jsonl" in err
    assert alias_set(cand, env, house) == 1
    assert "not signed by a decision key pinned" in capsys.readouterr().err
    assert not (house / TABLE).exists()


def test_a_key_file_dropped_into_the_house_is_not_trusted(tmp_path: Path) -> None:
    """Trust is the committed trust log: a key file written and committed by hand, outside
    `house pin`, makes the house refuse rather than trust it."""
    house, _ = h.pinned_house(tmp_path)
    mine = h.keypair(tmp_path, "mine")
    (house / "trust/decision/ci.pub").write_bytes(mine[1].read_bytes())
    repo = git.Repo(house)
    assert h.snapshot_ok(house), "an uncommitted edit counts for nothing"
    repo.git.commit("-am", "swap the key")
    assert main(["house", "show", "--house", str(house)]) == 1


def test_a_decision_under_another_house_policy_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The house policy changed after the decision: refused; accepted again once the house
    policy lists the old digest in `accept`."""
    _run, env, house, _ci, cand = h.decided(tmp_path)
    old = parse(h.HOUSE_POLICY, "x").rules().sha256
    h.commit_policy(house, h.HOUSE_POLICY.replace('"vram/*"]', '"vram/*", "preflight/*"]'))
    assert alias_set(cand, env, house) == 1
    assert "was made under house policy" in capsys.readouterr().err
    text = h.HOUSE_POLICY.replace('"vram/*"]', '"vram/*", "preflight/*"]')
    h.commit_policy(house, text.replace("version = 1", f'version = 1\naccept = ["{old}"]'))
    assert alias_set(cand, env, house) == 0


def test_candidate_edited_after_the_decision_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The alias gate compares the candidate file with the signed in-run copy."""
    _run, env, house, _ci, cand = h.decided(tmp_path)
    cand.write_text(cand.read_text() + "\n# edited\n")
    assert alias_set(cand, env, house) == 1
    assert "the signed copy run/attempt-001/candidate.toml" in capsys.readouterr().err


def _forge(run: RunDir, key: Path) -> Path:
    """Turn a no-promote into a promote the way someone holding a signing key would: the record,
    the manifest and the statement rewritten consistently, re-signed. Only the verdict lies."""
    d = run.path / "decision/attempt-001"
    rec = json.loads((d / "decision.json").read_text())
    rec["decision"], rec["headline"] = "promote", "promote"
    rec["evaluation"] |= {"promote": True, "verdict": "pass", "reasons": [], "missing": []}
    for g in rec["evaluation"]["gates"]:
        g["status"], g["verdict"] = "pass", "pass"
    for p in d.iterdir():
        p.chmod(0o644)
    (d / "decision.json").write_text(json.dumps(rec, indent=1) + "\n")
    stmt = json.loads((d / "statement.json").read_text())
    stmt["predicate"] = {"record": "decision/attempt-001/decision.json"} | rec
    for s in stmt["subject"]:
        if s["name"] == "decision/attempt-001/decision.json":
            s["digest"]["sha256"] = sha256_file(d / "decision.json")
    (d / "statement.json").write_text(json.dumps(stmt, indent=1) + "\n")
    manifest = json.loads((d / MANIFEST).read_text())
    for name in ("decision.json", "statement.json"):
        manifest["files"][name]["sha256"] = sha256_file(d / name)
    (d / MANIFEST).write_text(json.dumps(manifest))
    env = statement.envelope_path(run, 1)
    env.chmod(0o644)
    env.write_bytes(
        envelope_bytes(
            seal_envelope(statement.payload(run, 1), load_private(key), statement.PAYLOAD_TYPE)
        )
    )
    return env


def test_a_re_signed_edited_verdict_is_refused_by_verify(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Even signed by the pinned key, a verdict the evidence does not support is refused."""
    run, env, house, ci, cand = h.decided(tmp_path, vram=Verdict.FAIL)
    assert verify(env, load_public(ci[1])).ok
    _forge(run, ci[0])
    report = verify(env, load_public(ci[1]))
    assert not report.ok
    assert any("does not follow from the signed evidence" in p for p in report.problems)
    assert 'decision is "promote", derived "no-promote"' in " ".join(report.problems)
    assert alias_set(cand, env, house) == 1


def test_every_file_of_the_run_is_signed_and_the_envelope_is_portable(tmp_path: Path) -> None:
    """A one-byte change to any file of the run (the invocation attempt included) fails verify
    naming it; a copy of the run in another directory verifies the same."""
    run, env, _house, ci, _cand = h.decided(tmp_path)
    pub = load_public(ci[1])
    report = verify(env, pub)
    assert report.ok
    assert [n.split(":", 1)[0] for n in report.notes] == ["vram/attempt-001"]  # judged again
    names = {s["name"] for s in report.statement["subject"]}  # type: ignore[index]
    assert {"run/attempt-001/candidate.toml", "run/attempt-001/outcome.json"} <= names
    assert all(not n.startswith("/") for n in names), "every subject is a path inside the run"
    files = [p for p in run.all_files() if not p.name.endswith(".dsse.json")]
    for path in files:
        original = path.read_bytes()
        path.write_bytes(original[:-1] + bytes([original[-1] ^ 1]))
        bad = verify(env, pub)
        path.write_bytes(original)
        rel = path.relative_to(run.path).as_posix()
        assert not bad.ok and any(p.startswith(rel) for p in bad.problems), (rel, bad.problems)
    elsewhere = tmp_path / "elsewhere" / "copy" / run.run_id
    shutil.copytree(run.path, elsewhere)
    shutil.rmtree(run.path.parent.parent)
    moved = verify(elsewhere / "decision/attempt-001.dsse.json", pub)
    assert moved.ok, moved.problems


def _waiver(
    tmp_path: Path, house: Path, run: RunDir, key: Path, days: int = 7, **edit: str
) -> None:
    record = json.loads((run.path / "decision/attempt-001/decision.json").read_text())
    (ticket,) = [t for t in record["tickets"] if t["gate"] == "vram/telemetry"]
    bound = {
        "candidate_sha256": record["candidate_sha256"],
        "policy_sha256": record["policy_sha256"],
    }
    grant(
        TicketStore(tmp_path / "tickets"),
        house,
        ticket["id"],
        "no GPU here",
        key,
        bound | edit,
        days,
    )


def _second(tmp_path: Path, house: Path, cand: Path, ci: Path) -> tuple[RunDir, Path]:
    run, inv = h.make_run(tmp_path / "second", cand, Verdict.INCONCLUSIVE)
    _, env = h.decide(run, inv, setup(house), ci)
    assert env is not None
    return run, env


def test_a_waiver_by_a_pinned_approver_promotes_shown_as_waived(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An inconclusive gate waived by a pinned approver: "promote with 1 waiver (...)", waived
    (never pass) in the document, and verify and alias set accept it."""
    run, _env, house, ci, cand = h.decided(tmp_path, vram=Verdict.INCONCLUSIVE)
    alice = h.keypair(tmp_path, "alice")
    h.pin_waiver(house, alice[1], "alice")
    _waiver(tmp_path, house, run, alice[0])
    run2, env2 = _second(tmp_path, house, cand, ci[0])
    rec = json.loads((run2.path / "decision/attempt-001/decision.json").read_text())
    assert rec["headline"].startswith(
        "promote with 1 waiver (vram/telemetry inconclusive, waived by alice"
    )
    assert rec["evaluation"]["waived"] == ["vram/telemetry"]
    md = (run2.path / "decision/attempt-001/decision.md").read_text()
    assert "**promote with 1 waiver (vram/telemetry" in md
    assert "- vram: 1/2 passed; telemetry (waived)" in md
    assert "Waived, not passed: vram/telemetry" in md and "Every required gate passed." not in md
    pub = load_public(ci[1])
    assert verify(env2, pub, approvers=approvers(house)).ok
    bare = verify(env2, pub)
    assert not bare.ok and "checked only against the keys a house pins" in bare.problems[0]
    assert alias_set(cand, env2, house) == 0, capsys.readouterr().err


@pytest.mark.parametrize(
    "case, why",
    [
        ("expired", "it expired at"),
        ("self-signed", "signed by the key that signs the decision"),
        ("other-digest", "it binds policy_sha256"),
        ("unpinned", "no pinned waiver approver key verifies it"),
    ],
)
def test_waivers_that_do_not_count(tmp_path: Path, case: str, why: str) -> None:
    """Expired, signed by the run's own key, bound to another policy, or by an unpinned key: not
    accepted, the gate still blocks, and the decision is no-promote."""
    run, _env, house, ci, cand = h.decided(tmp_path, vram=Verdict.INCONCLUSIVE)
    alice = h.keypair(tmp_path, "alice")
    h.pin_waiver(house, alice[1], "alice")
    h.pin_waiver(house, ci[1], "ci-as-approver")
    key = {"self-signed": ci[0], "unpinned": h.keypair(tmp_path, "bob")[0]}.get(case, alice[0])
    edit = {"policy_sha256": "f" * 64} if case == "other-digest" else {}
    _waiver(tmp_path, house, run, key, days=0 if case == "expired" else 7, **edit)
    run2, env2 = _second(tmp_path, house, cand, ci[0])
    rec = json.loads((run2.path / "decision/attempt-001/decision.json").read_text())
    (w,) = rec["waivers"]
    assert not w["accepted"] and why in w["why"], w
    assert rec["decision"] == "no-promote"
    assert any(g["status"] == "blocks" for g in rec["evaluation"]["gates"])
    assert verify(env2, load_public(ci[1])).ok, "the no-promote itself verifies"


def test_a_waiver_signed_later_by_its_approver_fails_verify(tmp_path: Path) -> None:
    """A decision left unsigned and then signed with the waiver's own key: verify judges the
    waiver again with the actual signer and refuses."""
    run, _env, house, _ci, cand = h.decided(tmp_path, vram=Verdict.INCONCLUSIVE)
    alice = h.keypair(tmp_path, "alice")
    h.pin_waiver(house, alice[1], "alice")
    _waiver(tmp_path, house, run, alice[0])
    run2, inv = h.make_run(tmp_path / "second", cand, Verdict.INCONCLUSIVE)
    record, _ = h.decide(run2, inv, setup(house), None)
    assert record.decision == "promote"
    env2 = statement.sign_attempt(run2, 1, load_private(alice[0]))  # bypassing sign_decision
    report = verify(env2, load_public(alice[1]), approvers=approvers(house))
    assert not report.ok and any("a run cannot waive itself" in p for p in report.problems)
