"""The evidence store: written once, sealed, listed with digests, split, redacted."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from qualify.evidence.store import MANIFEST, MAX_FILE_BYTES, EvidenceError, EvidenceStore
from qualify.redact import REDACTED


def test_sealed_file_cannot_be_rewritten_by_a_later_attempt_or_run(tmp_path: Path) -> None:
    """A sealed file is listed with its sha256; no later attempt or run can replace it."""
    store = EvidenceStore(tmp_path)
    run = store.new_run("cand")
    (run.path / "run.json").write_text("{}")
    a1 = run.new_attempt("identity")
    a1.write_text("answer.txt", "first")
    a1.seal()
    manifest = json.loads((a1.path / MANIFEST).read_text())
    digest = hashlib.sha256(b"first").hexdigest()
    assert manifest["files"]["answer.txt"] == {"sha256": digest, "size": 5}
    with pytest.raises(EvidenceError):
        a1.write_text("other.txt", "late")
    a2 = run.new_attempt("identity")
    assert a2.number == 2 and a2.path != a1.path
    a2.write_text("answer.txt", "second")
    # A different Attempt object pointed at the sealed directory still cannot replace the file.
    forged = type(a1)(path=a1.path, stage="identity", number=1)
    with pytest.raises(EvidenceError):
        forged.write_text("answer.txt", "forged")
    reopened = store.open_run(str(run.path))
    assert (reopened.path / "identity" / "attempt-001" / "answer.txt").read_text() == "first"
    assert not (a1.path / "answer.txt").stat().st_mode & 0o222


def test_same_name_twice_in_one_attempt_is_refused(tmp_path: Path) -> None:
    """Within an attempt a file name is used once."""
    a = EvidenceStore(tmp_path).new_run("c").new_attempt("s")
    a.write_json("x.json", {"a": 1})
    with pytest.raises(EvidenceError):
        a.write_json("x.json", {"a": 2})


def test_large_files_are_split_under_the_limit(tmp_path: Path) -> None:
    """Nothing over 1 MiB is written: a large blob and a long stream become parts."""
    a = EvidenceStore(tmp_path).new_run("c").new_attempt("s")
    names = a.write_bytes("big.bin", b"x" * (MAX_FILE_BYTES * 2 + 10))
    assert names == ["big.bin.part000", "big.bin.part001", "big.bin.part002"]
    w = a.stream("log")
    line = b"y" * 1000 + b"\n"
    for _ in range(2500):
        w.write(line)
    a.seal()
    sizes = [p.stat().st_size for p in a.path.iterdir()]
    assert max(sizes) <= MAX_FILE_BYTES
    logs = sorted(p.name for p in a.path.glob("log.*.log"))
    assert len(logs) == 3
    joined = b"".join((a.path / n).read_bytes() for n in logs)
    assert joined == line * 2500


def test_secrets_are_redacted(tmp_path: Path) -> None:
    """Authorization headers and the API key value never reach the disk."""
    run = EvidenceStore(tmp_path).new_run("c")
    run.redactor.add("sk-secret-123")
    a = run.new_attempt("s")
    a.write_json(
        "ex.json",
        {"headers": {"Authorization": "Bearer sk-secret-123"}, "body": "key sk-secret-123"},
    )
    text = (a.path / "ex.json").read_text()
    assert "sk-secret-123" not in text
    assert json.loads(text)["headers"]["Authorization"] == REDACTED
