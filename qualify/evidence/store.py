"""The evidence store: files written once, sealed read-only, listed in a manifest of digests.

Layout: `<root>/<candidate>/<run-id>/<stage>/attempt-NNN/`. A file is created with O_EXCL, so
nothing the tool writes can replace an existing file; a file over the size limit is split into
numbered parts; an attempt is sealed by writing `manifest.json` (sha256 and size of every file)
and dropping every write bit.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import stat
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from qualify.errors import BadInput
from qualify.records import StageResult
from qualify.redact import Redactor

MAX_FILE_BYTES = 1024 * 1024
MANIFEST = "manifest.json"
RESULT = "result.json"
_ATTEMPT_RE = re.compile(r"^attempt-(\d{3,})$")


class EvidenceError(Exception):
    """An attempt to break the store's rules (rewrite, write after seal, oversize)."""


def sha256_file(path: Path) -> str:
    with path.open("rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def utc_now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _write_once(path: Path, data: bytes) -> None:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        raise EvidenceError(f"{path} already exists; evidence is never rewritten") from None
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())


def dumps(obj: object) -> bytes:
    return (json.dumps(obj, indent=1, sort_keys=False, default=str) + "\n").encode()


@dataclass(eq=False)
class ChunkedWriter:
    """An append-only stream split into `name.NNN.ext` parts, each at most the size limit."""

    attempt: Attempt
    stem: str
    ext: str
    files: list[str] = field(default_factory=list)
    _part: int = -1
    _fd: int | None = None
    _size: int = 0
    _pending: bytes = b""

    def _roll(self) -> None:
        self._close_fd()
        self._part += 1
        name = f"{self.stem}.{self._part:03d}.{self.ext}"
        path = self.attempt.reserve(name)
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644)
        self._size = 0
        self.files.append(name)

    def write(self, data: bytes) -> None:
        """Append, with every known secret replaced (a secret split across writes is held
        back until it is whole); a line is never split across parts unless it alone exceeds
        the limit."""
        red = self.attempt.redactor
        if not red.secrets:
            self._emit(self._pending + data)
            self._pending = b""
            return
        data = red.scrub_bytes(self._pending + data)
        keep = red.held_back(data)
        self._pending = data[len(data) - keep :] if keep else b""
        self._emit(data[: len(data) - keep])

    def _emit(self, data: bytes) -> None:
        while data:
            if self._fd is None or (self._size and self._size + len(data) > MAX_FILE_BYTES):
                self._roll()
            room = MAX_FILE_BYTES - self._size
            piece, data = data[:room], data[room:]
            assert self._fd is not None
            os.write(self._fd, piece)
            self._size += len(piece)

    def _close_fd(self) -> None:
        if self._fd is not None:
            os.fsync(self._fd)
            os.close(self._fd)
            self._fd = None

    def close(self) -> None:
        if self._pending:  # no secret begins here after all: the stream ended
            self._emit(self.attempt.redactor.scrub_bytes(self._pending))
            self._pending = b""
        self._close_fd()


@dataclass
class Attempt:
    """One attempt of one stage: a directory whose files are written once, then sealed."""

    path: Path
    stage: str
    number: int
    redactor: Redactor = field(default_factory=Redactor)
    _names: set[str] = field(default_factory=set)
    _open: list[ChunkedWriter] = field(default_factory=list)
    sealed: bool = False

    def reserve(self, name: str) -> Path:
        if self.sealed:
            raise EvidenceError(f"{self.path} is sealed; nothing more can be written to it")
        if "/" in name or name in (MANIFEST, "") or name.startswith("."):
            raise EvidenceError(f"invalid evidence file name {name!r}")
        if name in self._names:
            raise EvidenceError(f"{self.path / name} already exists; evidence is never rewritten")
        self._names.add(name)
        return self.path / name

    def write_bytes(self, name: str, data: bytes) -> list[str]:
        """Write a file once, every known secret replaced; over the size limit it becomes
        `name.partNNN` files."""
        if self.redactor.secrets:
            data = self.redactor.scrub_bytes(data)
        if len(data) <= MAX_FILE_BYTES:
            _write_once(self.reserve(name), data)
            return [name]
        names = []
        for i in range(0, len(data), MAX_FILE_BYTES):
            part = f"{name}.part{i // MAX_FILE_BYTES:03d}"
            _write_once(self.reserve(part), data[i : i + MAX_FILE_BYTES])
            names.append(part)
        return names

    def write_json(self, name: str, obj: object) -> list[str]:
        return self.write_bytes(name, dumps(self.redactor.scrub(obj)))

    def write_text(self, name: str, text: str) -> list[str]:
        return self.write_bytes(name, self.redactor.scrub_text(text).encode())

    def stream(self, stem: str, ext: str = "log") -> ChunkedWriter:
        w = ChunkedWriter(self, stem, ext)
        self._open.append(w)
        return w

    def write_result(self, result: StageResult) -> None:
        self.write_json(RESULT, result.model_dump(mode="json"))

    def seal(self) -> None:
        """Close open streams, write the manifest, and drop every write bit."""
        if self.sealed:
            return
        for w in self._open:  # closing one twice does nothing
            w.close()
        files = {
            p.name: {"sha256": sha256_file(p), "size": p.stat().st_size}
            for p in sorted(self.path.iterdir())
            if p.is_file() and p.name != MANIFEST
        }
        manifest = {
            "version": 1,
            "stage": self.stage,
            "attempt": self.number,
            "sealed_at": utc_now(),
            "files": files,
        }
        _write_once(self.path / MANIFEST, dumps(manifest))
        for p in self.path.iterdir():
            p.chmod(stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)
        self.path.chmod(0o555)
        self.sealed = True


@dataclass
class RunDir:
    """One run of one candidate."""

    path: Path
    redactor: Redactor = field(default_factory=Redactor)

    @property
    def run_id(self) -> str:
        return self.path.name

    @property
    def candidate_name(self) -> str:
        return self.path.parent.name

    def attempt_dirs(self, stage: str) -> list[Path]:
        d = self.path / stage
        if not d.is_dir():
            return []
        found = [(int(m.group(1)), p) for p in d.iterdir() if (m := _ATTEMPT_RE.match(p.name))]
        return [p for _, p in sorted(found)]

    def new_attempt(self, stage: str) -> Attempt:
        d = self.path / stage
        d.mkdir(exist_ok=True)
        n = len(self.attempt_dirs(stage)) + 1
        while True:
            p = d / f"attempt-{n:03d}"
            try:
                p.mkdir()
                return Attempt(path=p, stage=stage, number=n, redactor=self.redactor)
            except FileExistsError:
                n += 1

    def results(self, stage: str) -> list[StageResult]:
        out = []
        for d in self.attempt_dirs(stage):
            f = d / RESULT
            if f.is_file():
                out.append(StageResult.model_validate_json(f.read_text()))
        return out

    def all_files(self) -> Iterator[Path]:
        for p in sorted(self.path.rglob("*")):
            if p.is_file():
                yield p


@dataclass
class EvidenceStore:
    root: Path

    def new_run(self, candidate_name: str, info: Mapping[str, object] | None = None) -> RunDir:
        """A new run; with `info`, its `run.json` (the file that makes a folder a run): its
        version and id, `info`, and when it was created."""
        d = self.root / candidate_name
        d.mkdir(parents=True, exist_ok=True)
        while True:
            p = d / f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{secrets.token_hex(3)}"
            try:
                p.mkdir()
            except FileExistsError:
                continue
            if info is not None:
                run_json = {"version": 1, "run_id": p.name, **info, "created_at": utc_now()}
                _write_once(p / "run.json", dumps(run_json))
                (p / "run.json").chmod(0o444)
            return RunDir(p)

    def open_run(self, ref: str) -> RunDir:
        """A run by path, by `<candidate>/<run-id>`, or by run id alone."""
        p = Path(ref)
        for cand in (p, self.root / ref):
            if cand.is_dir() and (cand / "run.json").is_file():
                return RunDir(cand.resolve())
        if self.root.is_dir():
            hits = [c for c in self.root.glob(f"*/{ref}") if (c / "run.json").is_file()]
            if len(hits) == 1:
                return RunDir(hits[0].resolve())
        raise BadInput(
            f"no run {ref!r}",
            [f"run: expected a run directory or a run id under {self.root} (found none)"],
        )


def write_atomic(path: Path, text: str) -> None:
    """Replace a mutable file outside the evidence (alias table, tickets) atomically: a reader
    sees the old file or the new one, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}-")
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
