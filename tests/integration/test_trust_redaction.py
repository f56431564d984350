"""The real llama-server given an API key in its environment (LLAMA_API_KEY, which it enforces):
a signed identity run under a house moves its alias, and the key is nowhere in the evidence,
the run log and the servers' logs included."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from pathlib import Path

import git
import pytest

from qualify.cli import main
from qualify.decision.signing import generate
from qualify.decision.trust import init, pin
from qualify.pipeline import execute
from qualify.progress import Progress

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
