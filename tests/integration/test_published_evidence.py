"""Every signed decision published under docs/ verifies from a fresh clone, in another directory.

A reader has the repository at HEAD, nothing else: no evidence store, no working tree. So the
test clones the repository into a temporary directory, unpacks the evidence archives published
next to the envelopes, and runs that clone's `qualify verify` on each envelope with the public
key committed beside it. An envelope verifies only if every file it names is in the clone (or
the archives) unchanged; a subject named by an absolute path points outside the clone, where
a reader has nothing, and fails here even if this machine happens to have the file.

Envelopes (`*.dsse.json`) and keys (`*.pub`) are found by name: a key is the one `*.pub` in the
envelope's directory or the nearest directory above it (for an envelope inside an archive: within
the archive, else the archive's directory). An envelope copied out of its run finds the run by
the `run_id` its statement names, among the unpacked archives.
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.serverless]

ROOT = Path(__file__).resolve().parents[2]
DOCS = "docs"
ENVELOPE = ".dsse.json"
ARCHIVES = (".tgz", ".tar.gz", ".tar.xz")


def _committed(root: Path) -> list[str]:
    out = subprocess.run(
        ["git", "-C", str(root), "ls-files", "-z", "--", DOCS],
        capture_output=True,
        check=True,
    ).stdout
    return sorted(p for p in out.decode().split("\0") if p)


def _published() -> list[str]:
    """Every committed envelope: `docs/…/x.dsse.json`, or `docs/…/a.tgz:…/x.dsse.json`."""
    found = []
    for rel in _committed(ROOT):
        if rel.endswith(ENVELOPE):
            found.append(rel)
        elif rel.endswith(ARCHIVES):
            with tarfile.open(ROOT / rel) as tf:
                found += [f"{rel}:{m.name}" for m in tf.getmembers() if m.name.endswith(ENVELOPE)]
    return found


PUBLISHED = _published()


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The repository at HEAD, cloned elsewhere, its docs' archives unpacked beside it."""
    base = tmp_path_factory.mktemp("published")
    dest = base / "repo"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(dest)], check=True)
    for rel in _committed(dest):
        if rel.endswith(ARCHIVES):
            with tarfile.open(dest / rel) as tf:
                tf.extractall(_unpacked(dest, rel), filter="data")
    return dest


def _unpacked(clone: Path, archive: str) -> Path:
    return clone.parent / "unpacked" / archive


def _statement(envelope: Path) -> dict[str, Any]:
    """The signed statement, read without trusting it (only to find the run and the paths)."""
    try:
        env = json.loads(envelope.read_text())
        stmt = json.loads(base64.b64decode(env["payload"]))
    except (ValueError, KeyError, TypeError):
        return {}
    return stmt if isinstance(stmt, dict) else {}


def _key_inside(start: Path, top: Path) -> Path | None:
    """The nearest one `*.pub` at or above an unpacked envelope within its archive, if any."""
    d = start
    while d != top.parent:
        keys = sorted(d.glob("*.pub"))
        assert len(keys) < 2, f"{d} holds several public keys ({[k.name for k in keys]})"
        if keys:
            return keys[0]
        d = d.parent
    return None


def _key(start: Path, stop: Path) -> Path:
    d = start
    while True:
        keys = sorted(d.glob("*.pub"))
        if len(keys) == 1:
            return keys[0]
        assert not keys, f"{d} holds several public keys ({[k.name for k in keys]}): which one?"
        assert d != stop, f"no public key (*.pub) in {start} or above it up to {stop}"
        d = d.parent


def _archived(run_id: Any, clone: Path) -> list[Path]:
    return [
        p.parent for p in (clone.parent / "unpacked").rglob("run.json") if p.parent.name == run_id
    ]


def _run_of(envelope: Path, stmt: dict[str, Any], clone: Path) -> Path | None:
    """None when the envelope sits in its whole run (`<run>/decision/…`); else the run to
    verify it against: the unpacked run, or for a published copy of a later decision (its
    decision attempt and the files its document links, laid out as in the run) that run with
    the copy put back in place, as a reader who unpacks the archive beside it would have it."""
    run_id = (stmt.get("predicate") or {}).get("run_id")
    home = envelope.parent.parent
    inside = (clone.parent / "unpacked") in envelope.parents
    if (home / "run.json").is_file() and (inside or not _archived(run_id, clone)):
        return None
    hits = _archived(run_id, clone)
    assert len(hits) == 1, f"{envelope.name}: run {run_id!r} is not in any published archive"
    if inside or home.name != run_id:
        return hits[0]
    merged = clone.parent / "merged" / str(run_id)
    if not merged.exists():
        shutil.copytree(hits[0], merged, symlinks=True)
        for f in home.rglob("*"):
            if f.is_file() and f.parent != home.parent:
                dest = merged / f.relative_to(home)
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(f, dest)
    return merged


def test_something_is_published() -> None:
    """The test below has envelopes to check: docs/ publishes signed decisions."""
    assert PUBLISHED, "no *.dsse.json under docs/ (committed, or in a committed archive)"


@pytest.mark.parametrize("published", PUBLISHED, ids=PUBLISHED)
def test_published_envelope_verifies_from_a_fresh_clone(published: str, clone: Path) -> None:
    """`qualify verify` of the clone, run in the clone, accepts the envelope with the key
    committed beside it; no subject lies outside the clone."""
    archive, _, member = published.partition(":")
    if member:
        envelope = _unpacked(clone, archive) / member
        key = _key_inside(envelope.parent, _unpacked(clone, archive)) or _key(
            (clone / archive).parent, clone / DOCS
        )
    else:
        envelope = clone / published
        key = _key(envelope.parent, clone / DOCS)
    stmt = _statement(envelope)
    outside = [
        s["name"]
        for s in stmt.get("subject", [])
        if isinstance(s, dict) and Path(str(s.get("name", ""))).is_absolute()
    ]
    run = _run_of(envelope, stmt, clone)
    cmd = [sys.executable, "-m", "qualify", "verify", str(envelope), "--key", str(key)]
    if run is not None:
        cmd += ["--run", str(run)]
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=clone)
    problems = [f"qualify verify exited {r.returncode}:\n{r.stderr}"] if r.returncode else []
    problems += [f"names a file outside the repository: {name}" for name in outside]
    assert not problems, f"{published} does not verify from a fresh clone: " + "\n".join(problems)
