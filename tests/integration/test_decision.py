"""The decision on real runs: signed, verified byte for byte, and gating a real alias change."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from pathlib import Path

import git
import pytest

from qualify.alias import log_path
from qualify.cli import main
from qualify.decision.conclude import sign
from qualify.decision.render import render_run
from qualify.decision.signing import generate, load_public
from qualify.decision.verify import verify
from qualify.evidence.store import RunDir
from qualify.pipeline import execute
from qualify.progress import Progress

pytestmark = pytest.mark.integration

PROMOTE_POLICY = {"vram_reserve_gib = 3.0": 'vram_reserve_gib = 3.0\nrequired = ["identity/*"]'}


@pytest.fixture(autouse=True)
def _tickets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QUALIFY_TICKETS", str(tmp_path / "tickets"))


@pytest.fixture
def keys(tmp_path: Path) -> tuple[Path, Path]:
    return generate(tmp_path / "keys" / "qualify")


@pytest.fixture
def real_run(
    candidate_factory: Callable[..., Path], tmp_path: Path
) -> Callable[..., tuple[RunDir, int, Path]]:
    """An identity-only qualification of the demo candidate on the real server."""

    def make(port: int, key: Path | None = None, promote: bool = False) -> tuple[RunDir, int, Path]:
        cand = candidate_factory(
            port, stages=["identity"], replace=PROMOTE_POLICY if promote else None
        )
        root = tmp_path / f"evidence-{port}"
        code = execute(cand, root, key=str(key) if key else None, progress=Progress(quiet=True))
        (run_dir,) = [p for p in root.glob("*/*") if (p / "run.json").is_file()]
        return RunDir(run_dir), code, cand

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


def test_run_ends_with_a_signed_decision_that_verifies(
    real_run: Callable[..., tuple[RunDir, int, Path]], keys: tuple[Path, Path]
) -> None:
    """`qualify run --key` renders the decision and signs it; `qualify verify` accepts it."""
    run, code, _ = real_run(18401, key=keys[0], promote=True)
    assert code == 0
    attempt = run.path / "decision" / "attempt-001"
    assert {p.name for p in attempt.iterdir()} == {
        "decision.json",
        "decision.md",
        "statement.json",
        "manifest.json",
    }
    report = verify(envelope_of(run), load_public(keys[1]))
    assert report.ok, report.problems
    assert report.predicate["decision"] == "promote"
    assert main(["verify", str(envelope_of(run)), "--key", str(keys[1])]) == 0
    md = (attempt / "decision.md").read_text()
    assert "**promote**" in md and "| Quantization | Q4_1 | Q4_1 | pass |" in md
    assert render_run(run) == md, "render from evidence reproduces the signed document"


def test_demo_policy_is_no_promote_naming_every_missing_stage(
    real_run: Callable[..., tuple[RunDir, int, Path]], tmp_path: Path
) -> None:
    """Under the default policy an identity-only run is no-promote; each absent stage is named,
    said to be not run, and has a ticket."""
    run, code, _ = real_run(18402)
    assert code == 1
    record = json.loads((run.path / "decision/attempt-001/decision.json").read_text())
    reasons = record["evaluation"]["reasons"]
    for stage in ("preflight", "context", "ab", "vram"):
        assert any(r.startswith(f"{stage}/*: required, but no gate matches") for r in reasons)
    md = (run.path / "decision/attempt-001/decision.md").read_text()
    assert "Preflight: not run (not listed in stages.run)." in md
    assert "VRAM: not run (not listed in stages.run)." in md
    opened = sorted(p.name for p in (tmp_path / "tickets" / "open").iterdir())
    assert len(opened) == 4 and all(t["action"] == "opened" for t in record["tickets"])


def test_one_changed_byte_fails_verify_naming_the_file(
    real_run: Callable[..., tuple[RunDir, int, Path]], keys: tuple[Path, Path]
) -> None:
    """One byte of an evidence file, the markdown, the candidate, or the envelope's payload:
    verify fails and names what changed; restored, it verifies again."""
    run, _, cand = real_run(18403, key=keys[0])
    env, pub = envelope_of(run), load_public(keys[1])
    targets = {
        "identity/attempt-001/result.json": run.path / "identity/attempt-001/result.json",
        "decision/attempt-001/decision.md": run.path / "decision/attempt-001/decision.md",
        str(cand.resolve()): cand,
    }
    for name, path in targets.items():
        original = flip(path)
        report = verify(env, pub)
        path.write_bytes(original)
        assert not report.ok and any(p.startswith(f"{name}: changed") for p in report.problems)
    original_env = env.read_bytes()
    data = json.loads(original_env)
    payload = bytearray(base64.b64decode(data["payload"]))
    payload[len(payload) // 2] ^= 0x01
    data["payload"] = base64.b64encode(bytes(payload)).decode()
    env.write_text(json.dumps(data))
    report = verify(env, pub)
    assert not report.ok and "signature does not verify" in report.problems[0]
    assert main(["verify", str(env), "--key", str(keys[1])]) == 1
    env.write_bytes(original_env)
    assert verify(env, pub).ok


def test_every_file_of_the_run_is_covered(
    real_run: Callable[..., tuple[RunDir, int, Path]], keys: tuple[Path, Path]
) -> None:
    """After `qualify sign`, changing one byte of any file of the run (envelopes aside), or of
    the candidate or control file, fails verification and names that file."""
    run, _, _ = real_run(18404)
    env, record = sign(run, keys[0])
    assert record.attempt == 2, "the invocation was sealed after attempt 1: a new decision"
    pub = load_public(keys[1])
    assert verify(env, pub).ok and verify(env, pub).notes == []
    files = [p for p in run.all_files() if not p.name.endswith(".dsse.json")]
    info = json.loads((run.path / "run.json").read_text())
    files += [Path(p) for p in (info["candidate_path"], info["control_path"]) if p]
    assert len(files) > 20
    for path in files:
        original = flip(path)
        report = verify(env, pub)
        path.write_bytes(original)
        assert not report.ok, f"{path} changed and verify did not notice"
        shown = str(path.relative_to(run.path)) if run.path in path.parents else str(path)
        assert any(p.startswith(shown) for p in report.problems), (path, report.problems)
    assert verify(env, pub).ok
    again, same = sign(run, keys[0])
    assert again == env and same.attempt == 2, "a complete signed decision is not redone"


def test_a_file_added_to_a_signed_attempt_fails(
    real_run: Callable[..., tuple[RunDir, int, Path]], keys: tuple[Path, Path]
) -> None:
    """A file slipped into a signed attempt directory is reported as added."""
    run, _, _ = real_run(18405, key=keys[0])
    (run.path / "identity/attempt-001/extra.json").write_text("{}")
    report = verify(envelope_of(run), load_public(keys[1]))
    assert not report.ok
    assert "identity/attempt-001/extra.json: added to a signed attempt" in report.problems[0]


@pytest.fixture
def table(tmp_path: Path) -> Path:
    repo = git.Repo.init(tmp_path / "repo")
    with repo.config_writer() as cw:
        cw.set_value("user", "name", "qualify tests")
        cw.set_value("user", "email", "tests@example.invalid")
    repo.index.commit("empty")
    return tmp_path / "repo" / "aliases.toml"


def alias_set(cand: Path, env: Path, pub: Path, table: Path, name: str = "demo-chat") -> int:
    args = ["alias", "set", name, str(cand), "--decision", str(env), "--key", str(pub)]
    return main([*args, "--table", str(table)])


def test_alias_refused_for_no_promote(
    real_run: Callable[..., tuple[RunDir, int, Path]],
    keys: tuple[Path, Path],
    table: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A verified but no-promote decision cannot move an alias; nothing is written."""
    run, _, cand = real_run(18406, key=keys[0])
    assert alias_set(cand, envelope_of(run), keys[1], table) == 1
    assert "the decision is no-promote" in capsys.readouterr().err
    assert not table.exists()


def test_alias_gating_on_a_real_promote(
    real_run: Callable[..., tuple[RunDir, int, Path]],
    keys: tuple[Path, Path],
    table: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Refused for a tampered envelope, another key and an edited candidate; accepted for a
    valid promote, which writes the table, chains the log and commits both."""
    run, code, cand = real_run(18407, key=keys[0], promote=True)
    env = envelope_of(run)
    assert code == 0
    _, other_pub = generate(tmp_path / "keys" / "other")
    assert alias_set(cand, env, other_pub, table) == 1
    assert "another key" in capsys.readouterr().err
    original = env.read_bytes()
    data = json.loads(original)
    data["payload"] = base64.b64encode(base64.b64decode(data["payload"]) + b" ").decode()
    env.write_text(json.dumps(data))
    assert alias_set(cand, env, keys[1], table) == 1
    assert "does not verify" in capsys.readouterr().err
    env.write_bytes(original)
    text = cand.read_text()
    cand.write_text(text + "\n# edited after the decision\n")
    assert alias_set(cand, env, keys[1], table) == 1
    assert "candidate" in capsys.readouterr().err
    cand.write_text(text)
    assert not table.exists()
    assert alias_set(cand, env, keys[1], table) == 0
    repo = git.Repo(table.parent)
    digest = json.loads(log_path(table).read_text().splitlines()[0])["decision_sha256"]
    assert digest in repo.head.commit.message
    assert set(repo.head.commit.stats.files) == {"aliases.toml", "aliases.log.jsonl"}
    assert 'candidate = "smollm2-135m-ngram"' in table.read_text()
    assert main(["alias", "history", "--table", str(table)]) == 0
    assert "chain intact: 1 entries" in capsys.readouterr().out


def test_alias_history_detects_an_edited_log(
    real_run: Callable[..., tuple[RunDir, int, Path]],
    keys: tuple[Path, Path],
    table: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Editing a logged change breaks the chain: history exits 1, and set is refused."""
    run, _, cand = real_run(18408, key=keys[0], promote=True)
    assert alias_set(cand, envelope_of(run), keys[1], table) == 0
    log = log_path(table)
    log.write_text(log.read_text().replace('"alias": "demo-chat"', '"alias": "prod-chat"'))
    assert main(["alias", "history", "--table", str(table)]) == 1
    assert "its hash does not match" in capsys.readouterr().err
    cand.write_text(cand.read_text())
    assert alias_set(cand, envelope_of(run), keys[1], table) == 1


def test_alias_bad_input_is_exit_2(
    real_run: Callable[..., tuple[RunDir, int, Path]],
    keys: tuple[Path, Path],
    table: Path,
    tmp_path: Path,
) -> None:
    """A public key that does not exist is bad input (exit 2), not a refusal."""
    run, _, cand = real_run(18409, key=keys[0], promote=True)
    assert alias_set(cand, envelope_of(run), tmp_path / "absent.pub", table) == 2


def test_render_cli_reproduces_the_document_without_a_server(
    real_run: Callable[..., tuple[RunDir, int, Path]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`qualify render RUN` prints the recorded document from evidence alone."""
    run, _, _ = real_run(18410)
    capsys.readouterr()
    assert main(["render", str(run.path)]) == 0
    assert capsys.readouterr().out == (run.path / "decision/attempt-001/decision.md").read_text()
