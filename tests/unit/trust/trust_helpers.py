"""Shared steps of the trust tests: a decided run, `alias set` through the command line, a
consistent forgery by a holder of the pinned decision key."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from qualify.cli import main
from qualify.decision import statement
from qualify.evidence.signing import envelope_bytes, load_private, seal_envelope
from qualify.evidence.store import MANIFEST, RunDir, sha256_file


def alias_set(cand: Path, env: Path, house: Path, name: str = "demo-chat") -> int:
    return main(["alias", "set", name, str(cand), "--decision", str(env), "--house", str(house)])


def writable(d: Path) -> None:
    d.chmod(0o755)
    for p in d.iterdir():
        if p.is_file():
            p.chmod(0o644)


def resign(run: RunDir, key: Path, edit: Callable[[dict[str, Any]], None], n: int = 1) -> Path:
    """Edit the decision record with `edit`, rewrite the statement and manifest consistently and
    sign again with `key`: what a holder of a pinned decision key can do."""
    d = run.path / statement.attempt_rel(n)
    writable(d)
    rec = json.loads((d / "decision.json").read_text())
    edit(rec)
    (d / "decision.json").write_text(json.dumps(rec, indent=1) + "\n")
    stmt = json.loads((d / "statement.json").read_text())
    stmt["predicate"] = {"record": f"{statement.attempt_rel(n)}/decision.json"} | rec
    for s in stmt["subject"]:
        if s["name"] == f"{statement.attempt_rel(n)}/decision.json":
            s["digest"]["sha256"] = sha256_file(d / "decision.json")
    (d / "statement.json").write_text(json.dumps(stmt, indent=1) + "\n")
    manifest = json.loads((d / MANIFEST).read_text())
    for name in ("decision.json", "statement.json"):
        manifest["files"][name]["sha256"] = sha256_file(d / name)
    (d / MANIFEST).write_text(json.dumps(manifest))
    env = statement.envelope_path(run, n)
    env.chmod(0o644)
    payload = statement.payload(run, n)
    env.write_bytes(
        envelope_bytes(seal_envelope(payload, load_private(key), statement.PAYLOAD_TYPE))
    )
    return env
