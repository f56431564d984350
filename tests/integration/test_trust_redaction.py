"""Trust against the real llama-server: given an API key in its environment (LLAMA_API_KEY,
which it enforces), a signed identity run under a house moves its alias and the key is nowhere
in the evidence, the run log and the server's logs included; an identity result.json rewritten
to pass and signed again is refused by `verify`, which judges identity again from the raw
exchanges."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from pathlib import Path

import git
import pytest

from qualify.cli import main
from qualify.evidence.signing import generate
from qualify.pipeline import execute
from qualify.progress import Progress
from qualify.trust.repository import init, pin

pytestmark = pytest.mark.integration

HOUSE = """\
version = 1
required = ["identity/*"]
critical = ["identity/*"]

[thresholds]
unverifiable_pins = ["revision"]
"""


def test_a_key_in_the_real_servers_environment_is_nowhere_in_the_evidence(
    candidate_factory: Callable[..., Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = "sk-" + secrets.token_hex(20)
    monkeypatch.setenv("LLAMA_API_KEY", key)
    monkeypatch.setenv("QUALIFY_TICKETS", str(tmp_path / "tickets"))
    monkeypatch.delenv("QUALIFY_HOUSE", raising=False)
    cand = candidate_factory(
        "keyed",
        stages=["identity"],
        replace={
            'health_path = "/health"': 'health_path = "/health"\napi_key_env = "LLAMA_API_KEY"'
        },
    )
    ci = generate(tmp_path / "keys" / "ci")
    house = tmp_path / "house"
    init(house)
    (house / "house-policy.toml").write_text(HOUSE)
    git.Repo(house).git.commit("-am", "house: identity is the bar")
    pin(house, "decision", ci[1], "ci", "the CI runner signs decisions")
    root = tmp_path / "evidence"
    code = execute(cand, root, key=str(ci[0]), progress=Progress(quiet=True), house=house)
    assert code == 0, "identity passes: the server took the key qualify sent"
    (run,) = [p for p in root.glob("*/*") if (p / "run.json").is_file()]
    files = [p for p in run.rglob("*") if p.is_file()]
    assert any(p.name.startswith("stderr") for p in files), "the server's log is evidence"
    leaks = [p.relative_to(run).as_posix() for p in files if key.encode() in p.read_bytes()]
    assert leaks == []
    env = run / "decision/attempt-001.dsse.json"
    argv = ["alias", "set", "demo-chat", str(cand), "--decision", str(env), "--house", str(house)]
    assert main(argv) == 0


def _house(tmp_path: Path, pub: Path, policy: str) -> Path:
    house = tmp_path / "house"
    init(house)
    (house / "house-policy.toml").write_text(policy)
    git.Repo(house).git.commit("-am", "house: identity is the bar")
    pin(house, "decision", pub, "ci", "the CI runner signs decisions")
    return house


def test_a_rewritten_identity_result_is_refused_from_its_exchanges(
    candidate_factory: Callable[..., Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real identity run whose revision pin stays unverified (the house does not accept it):
    no-promote. A holder of the decision key rewrites identity's result.json to pass, re-seals,
    decides and signs again: `verify` judges identity again from the exchanges the server
    actually answered and refuses; an honest run verifies with identity judged again."""
    import json
    import shutil

    from qualify.decision.conclude import conclude, setup
    from qualify.decision.verify import verify
    from qualify.evidence.signing import load_private, load_public
    from qualify.evidence.store import RunDir, sha256_file

    monkeypatch.setenv("QUALIFY_TICKETS", str(tmp_path / "tickets"))
    monkeypatch.delenv("QUALIFY_HOUSE", raising=False)
    cand = candidate_factory("forged", stages=["identity"])
    ci = generate(tmp_path / "keys" / "ci")
    house = _house(tmp_path, ci[1], HOUSE.replace('unverifiable_pins = ["revision"]', ""))
    root = tmp_path / "evidence"
    code = execute(cand, root, key=str(ci[0]), progress=Progress(quiet=True), house=house)
    assert code == 1
    (run_dir,) = [p for p in root.glob("*/*") if (p / "run.json").is_file()]
    pub = load_public(ci[1])
    honest = verify(run_dir / "decision/attempt-001.dsse.json", pub)
    assert honest.ok and not any("identity" in n for n in honest.notes), honest.notes
    att = run_dir / "identity/attempt-001"
    att.chmod(0o755)
    for p in att.iterdir():
        p.chmod(0o644)
    result = json.loads((att / "result.json").read_text())
    for g in result["gates"]:
        g["verdict"] = "pass"
    result["verdict"] = "pass"
    (att / "result.json").write_text(json.dumps(result, indent=1) + "\n")
    manifest = json.loads((att / "manifest.json").read_text())
    manifest["files"]["result.json"]["sha256"] = sha256_file(att / "result.json")
    (att / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    for p in (run_dir / "decision").rglob("*"):
        p.parent.chmod(0o755)
        p.chmod(0o755 if p.is_dir() else 0o644)
    shutil.rmtree(run_dir / "decision")
    record = conclude(RunDir(run_dir), setup(house), load_private(ci[0]))
    assert record.promote, "the rewritten results alone make a promote"
    forged = verify(run_dir / "decision/attempt-001.dsse.json", pub)
    assert not forged.ok
    assert any("do not follow from the exchanges it kept" in p for p in forged.problems)
