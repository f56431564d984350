"""Reading a run for the decision: stage attempts, the candidate as run, the evidence listing."""

from __future__ import annotations

import json
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from qualify.candidate import Candidate
from qualify.decision.policy import StageAttempts
from qualify.evidence.store import MANIFEST, RESULT, RunDir, sha256_file
from qualify.records import StageResult

DECISION = "decision"
ENVELOPE_RE = re.compile(r"^decision/attempt-(\d{3,})\.dsse\.json$")
_ATTEMPT_NO = re.compile(r"attempt-(\d{3,})$")


def run_info(run: RunDir) -> dict[str, Any]:
    """`run.json`, or an empty table when the run has none (a run assembled by hand)."""
    try:
        data = json.loads((run.path / "run.json").read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def stage_attempts(run: RunDir, stage: str) -> StageAttempts:
    """Every attempt of a stage, in order, with its result (None when it left none)."""
    out: StageAttempts = []
    for d in run.attempt_dirs(stage):
        m = _ATTEMPT_NO.search(d.name)
        number = int(m.group(1)) if m else 0
        try:
            res: StageResult | None = StageResult.model_validate_json((d / RESULT).read_text())
        except (OSError, ValidationError):
            res = None
        out.append((number, res))
    return out


def stage_names(run: RunDir) -> list[str]:
    """Directories that hold stage results (server logs and the invocation have none)."""
    names = []
    for d in run.stage_dirs():
        if d.name != DECISION and any((a / RESULT).is_file() for a in run.attempt_dirs(d.name)):
            names.append(d.name)
    return names


def candidate_as_run(run: RunDir, info: dict[str, Any]) -> Candidate | None:
    """The candidate from the run's own copy (the latest invocation), else its recorded path."""
    paths = [d / "candidate.toml" for d in reversed(run.attempt_dirs("run"))]
    if info.get("candidate_path"):
        paths.append(Path(info["candidate_path"]))
    for p in paths:
        try:
            return Candidate.model_validate(tomllib.loads(p.read_text()))
        except (OSError, ValueError, ValidationError):
            continue
    return None


@dataclass
class Listing:
    """Every evidence file of a run with its digest, and what could not be covered."""

    files: dict[str, str] = field(default_factory=dict)
    unsealed: list[str] = field(default_factory=list)
    integrity: list[str] = field(default_factory=list)

    @property
    def root(self) -> str:
        from qualify.decision.signing import sha256_bytes

        return sha256_bytes(root_text(self.files).encode())


def root_text(files: dict[str, str]) -> str:
    return "".join(f"{digest}  {name}\n" for name, digest in sorted(files.items()))


def _attempt_dir(rel: Path) -> str | None:
    return str(rel.parent) if len(rel.parts) >= 3 and _ATTEMPT_NO.search(rel.parts[1]) else None


def _check_manifest(run: RunDir, attempt: str, listing: Listing) -> None:
    try:
        manifest = json.loads((run.path / attempt / MANIFEST).read_text())
        recorded = {k: v["sha256"] for k, v in manifest["files"].items()}
    except (OSError, ValueError, KeyError, TypeError):
        listing.integrity.append(f"{attempt}/{MANIFEST}: unreadable")
        return
    for name, digest in recorded.items():
        got = listing.files.get(f"{attempt}/{name}")
        if got != digest:
            state = "missing" if got is None else "differs from its manifest"
            listing.integrity.append(f"{attempt}/{name}: {state}")


def evidence_listing(run: RunDir, skip: set[str] | None = None) -> Listing:
    """Files of sealed attempts and run.json; envelopes and attempts in `skip` are left out."""
    skip = skip or set()
    listing = Listing()
    sealed: set[str] = set()
    for p in run.all_files():
        rel = p.relative_to(run.path)
        name, attempt = rel.as_posix(), _attempt_dir(rel)
        if ENVELOPE_RE.match(name) or (attempt is not None and attempt in skip):
            continue
        if attempt is not None and not (run.path / attempt / MANIFEST).is_file():
            if attempt not in listing.unsealed:
                listing.unsealed.append(attempt)
            continue
        if attempt is not None:
            sealed.add(attempt)
        listing.files[name] = sha256_file(p)
    for attempt in sorted(sealed):
        _check_manifest(run, attempt, listing)
    return listing
