"""The decision on real runs: signed whole, verified anywhere, gating a real alias change
under a house policy and the keys the house pins."""

from __future__ import annotations

import base64
import json
import shutil
from collections.abc import Callable
from pathlib import Path

import git
import pytest

from qualify.alias import LOG
from qualify.cli import main
from qualify.decision.conclude import setup
from qualify.decision.render import render_run
from qualify.decision.verify import verify
from qualify.evidence.signing import generate, load_public
from qualify.evidence.store import RunDir
from qualify.pipeline import execute
from qualify.progress import Progress
from qualify.trust.repository import TABLE, init, pin

pytestmark = pytest.mark.integration

# A house policy the demo candidate meets with identity alone: the promote comes from the house,
# never from the candidate's own [policy]. Its thresholds reach the identity stage.
IDENTITY_HOUSE = """\
version = 1
required = ["identity/*"]
critical = ["identity/*"]

[thresholds]
# llama-server reports the model file, not a revision: the house accepts it as declared.
unverifiable_pins = ["revision"]
"""


@pytest.fixture(autouse=True)
def _tickets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QUALIFY_TICKETS", str(tmp_path / "tickets"))
    monkeypatch.delenv("QUALIFY_HOUSE", raising=False)


@pytest.fixture
def keys(tmp_path: Path) -> tuple[Path, Path]:
    return generate(tmp_path / "keys" / "ci")


def make_house(tmp_path: Path, pub: Path, policy: str | None) -> Path:
    root = tmp_path / "house"
    init(root)
    if policy is not None:
        (root / "house-policy.toml").write_text(policy)
        git.Repo(root).git.commit("-am", "house: identity is the bar")
    pin(root, "decision", pub, "ci", "the CI runner signs decisions")
    return root


@pytest.fixture
def real_run(
    candidate_factory: Callable[..., Path], tmp_path: Path, keys: tuple[Path, Path]
) -> Callable[..., tuple[RunDir, int, Path, Path]]:
    """An identity-only qualification of the demo candidate on the real server, signed by the
    CI key, under a house that pins it (the identity-only house, or the default one)."""

    def make(label: str, promote: bool = True) -> tuple[RunDir, int, Path, Path]:
        house = make_house(tmp_path, keys[1], IDENTITY_HOUSE if promote else None)
        cand = candidate_factory(label, stages=["identity"])
        root = tmp_path / f"evidence-{label}"
        code = execute(cand, root, key=str(keys[0]), progress=Progress(quiet=True), house=house)
        (run_dir,) = [p for p in root.glob("*/*") if (p / "run.json").is_file()]
        return RunDir(run_dir), code, cand, house

    return make


def envelope_of(run: RunDir, attempt: int = 1) -> Path:
    return run.path / "decision" / f"attempt-{attempt:03d}.dsse.json"


def flip(path: Path) -> bytes:
    """Change one byte in the middle of a file; returns the original bytes."""
    original = path.read_bytes()
    data = bytearray(original)
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    return original


def alias_set(cand: Path, env: Path, house: Path, key: Path | None = None) -> int:
    args = ["alias", "set", "demo-chat", str(cand), "--decision", str(env), "--house", str(house)]
    return main(args + (["--key", str(key)] if key else []))


def test_a_real_run_is_signed_whole_and_verifies_anywhere(
    real_run: Callable[..., tuple[RunDir, int, Path, Path]],
    keys: tuple[Path, Path],
    tmp_path: Path,
) -> None:
    """`qualify run --key --house`: promote under the house policy, printed in the document.
    A one-byte change to ANY file of the run (its own invocation attempt included) fails
    verify naming that file; a copy of the run in another directory verifies the same."""
    run, code, _, _ = real_run("whole")
    assert code == 0
    pub = load_public(keys[1])
    report = verify(envelope_of(run), pub)
    assert report.ok and report.notes == [], (report.problems, report.notes)
    md = (run.path / "decision/attempt-001/decision.md").read_text()
    assert "**promote**" in md and "): required: identity/*; critical: identity/*;" in md
    assert md.splitlines()[2].startswith("**Promote.**") and "## Decision\n\nPromote " in md
    assert render_run(run, setup(None)) == md, "render from evidence reproduces the document"
    files = [p for p in run.all_files() if not p.name.endswith(".dsse.json")]
    assert {"run/attempt-001/outcome.json", "run/attempt-001/candidate.toml"} <= {
        p.relative_to(run.path).as_posix() for p in files
    }
    for path in files:
        original = flip(path)
        bad = verify(envelope_of(run), pub)
        path.write_bytes(original)
        rel = path.relative_to(run.path).as_posix()
        assert not bad.ok and any(p.startswith(rel) for p in bad.problems), (rel, bad.problems)
    elsewhere = tmp_path / "another-machine" / run.path.parent.name / run.run_id
    shutil.copytree(run.path, elsewhere)
    shutil.rmtree(run.path)
    moved = verify(elsewhere / "decision/attempt-001.dsse.json", pub)
    assert moved.ok, moved.problems
    assert (
        main(["verify", str(elsewhere / "decision/attempt-001.dsse.json"), "--key", str(keys[1])])
        == 0
    )


def test_the_default_house_policy_is_no_promote_naming_every_missing_stage(
    real_run: Callable[..., tuple[RunDir, int, Path, Path]], tmp_path: Path
) -> None:
    """Under the default house policy an identity-only run is no-promote; each absent stage is
    named, said to be not run, and has a ticket."""
    run, code, _, _ = real_run("demo", promote=False)
    assert code == 1
    record = json.loads((run.path / "decision/attempt-001/decision.json").read_text())
    reasons = record["evaluation"]["reasons"]
    for stage in ("preflight", "context", "ab", "vram"):
        assert any(r.startswith(f"{stage}/*: required, but no gate matches") for r in reasons)
    md = (run.path / "decision/attempt-001/decision.md").read_text()
    assert "VRAM: not run (not listed in stages.run)." in md
    assert "## Gates and policy" in md and "House policy: `" in md
    assert all(t["action"] == "opened" for t in record["tickets"])


def test_alias_gating_on_a_real_promote(
    real_run: Callable[..., tuple[RunDir, int, Path, Path]],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Refused for the requester's own key, a tampered envelope and an edited candidate;
    accepted for the pinned key, which writes the table, chains the log and commits both."""
    run, code, cand, house = real_run("alias")
    env = envelope_of(run)
    assert code == 0
    _, own = generate(tmp_path / "keys" / "requester")
    assert alias_set(cand, env, house, own) == 1
    assert "is not pinned to sign decisions" in capsys.readouterr().err
    original = env.read_bytes()
    data = json.loads(original)
    data["payload"] = base64.b64encode(base64.b64decode(data["payload"]) + b" ").decode()
    env.chmod(0o644)
    env.write_text(json.dumps(data))
    assert alias_set(cand, env, house) == 1
    assert "not signed by a decision key pinned" in capsys.readouterr().err
    env.write_bytes(original)
    text = cand.read_text()
    cand.write_text(text + "\n# edited after the decision\n")
    assert alias_set(cand, env, house) == 1
    assert "the signed copy run/attempt-001/candidate.toml" in capsys.readouterr().err
    cand.write_text(text)
    assert not (house / TABLE).exists()
    assert alias_set(cand, env, house) == 0
    repo = git.Repo(house)
    digest = json.loads((house / LOG).read_text().splitlines()[0])["decision_sha256"]
    assert digest in repo.head.commit.message
    assert set(repo.head.commit.stats.files) == {"aliases.toml", "aliases.log.jsonl"}
    assert main(["alias", "history", "--house", str(house)]) == 0
    assert "chain intact: 1 entries" in capsys.readouterr().out
    log = house / LOG
    log.write_text(log.read_text().replace('"alias": "demo-chat"', '"alias": "prod-chat"'))
    assert main(["alias", "history", "--house", str(house)]) == 1


def test_no_promote_cannot_move_an_alias_and_render_needs_no_server(
    real_run: Callable[..., tuple[RunDir, int, Path, Path]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A verified no-promote is refused; `qualify render RUN` prints the signed document."""
    run, _, cand, house = real_run("nope", promote=False)
    assert alias_set(cand, envelope_of(run), house) == 1
    assert "the decision is no-promote" in capsys.readouterr().err
    assert not (house / TABLE).exists()
    assert main(["render", str(run.path)]) == 0
    assert capsys.readouterr().out == (run.path / "decision/attempt-001/decision.md").read_text()


def test_a_signed_decision_that_does_not_verify_is_exit_3_naming_the_fields(
    real_run: Callable[..., tuple[RunDir, int, Path, Path]],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`qualify run` verifies its own envelope as a reader would before it exits; a decision
    judged one way live and another way from its evidence is exit 3, the field named."""
    import qualify.decision.verify as checked

    honest = checked.verify
    drift = "identity/attempt-001/result.json: data.x is 1, its exchanges give 2"

    def drifted(*args: object, **kw: object) -> checked.VerifyReport:
        report = honest(*args, **kw)  # type: ignore[arg-type]
        report.problems.append(drift)
        return report

    monkeypatch.setattr(checked, "verify", drifted)
    run, code, _, _ = real_run("drifted")
    assert code == 3 and drift in capsys.readouterr().err
    assert envelope_of(run).is_file(), "the envelope stays for a reader to inspect"
