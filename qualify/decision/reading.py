"""Reading a run for the decision: run.json, the candidate as run, the evidence listing."""

from __future__ import annotations

import hashlib
import json
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import ValidationError

from qualify.candidate import Candidate
from qualify.evidence.store import MANIFEST, RESULT, RunDir, sha256_file
from qualify.records import StageRecord, StageResult
from qualify.registry import parse_record

if TYPE_CHECKING:
    from qualify.decision.record import DecisionRecord

DECISION = "decision"
R = TypeVar("R", bound=StageRecord)
ENVELOPE_RE = re.compile(r"^decision/attempt-(\d{3,})\.dsse\.json$")
_ATTEMPT_NO = re.compile(r"attempt-(\d{3,})$")


def attempt_number(attempt_rel: str) -> int:
    m = _ATTEMPT_NO.search(attempt_rel)
    return int(m.group(1)) if m else 0


def run_info(run: RunDir) -> dict[str, Any]:
    """`run.json`, or an empty table when the run has none (a run assembled by hand)."""
    try:
        data = json.loads((run.path / "run.json").read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def candidate_in_run(run: RunDir, rel: str | None) -> Candidate | None:
    """The candidate from the run's own copy (`run/attempt-NNN/candidate.toml`)."""
    if rel is None:
        return None
    try:
        return Candidate.model_validate(tomllib.loads((run.path / rel).read_text()))
    except (OSError, ValueError, ValidationError):
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

    def attempts(self) -> set[str]:
        """The sealed attempt directories (`stage/attempt-NNN`) the listing holds files of."""
        out = set()
        for name in self.files:
            parts = name.split("/")
            if len(parts) >= 3 and _ATTEMPT_NO.search(parts[1]):
                out.add(f"{parts[0]}/{parts[1]}")
        return out


def root_text(files: dict[str, str]) -> str:
    return "".join(f"{digest}  {name}\n" for name, digest in sorted(files.items()))


def _attempt_dir(parts: tuple[str, ...]) -> str | None:
    return f"{parts[0]}/{parts[1]}" if len(parts) >= 3 and _ATTEMPT_NO.search(parts[1]) else None


def check_manifests(run: RunDir, listing: Listing) -> None:
    """Name every listed file that no longer matches its attempt's manifest."""
    for attempt in sorted(listing.attempts()):
        try:
            manifest = json.loads((run.path / attempt / MANIFEST).read_text())
            recorded = {k: v["sha256"] for k, v in manifest["files"].items()}
        except (OSError, ValueError, KeyError, TypeError):
            listing.integrity.append(f"{attempt}/{MANIFEST}: unreadable")
            continue
        for name, digest in recorded.items():
            got = listing.files.get(f"{attempt}/{name}")
            if got != digest:
                state = "missing" if got is None else "differs from its manifest"
                listing.integrity.append(f"{attempt}/{name}: {state}")


def evidence_listing(run: RunDir, skip: set[str] | None = None) -> Listing:
    """Files of sealed attempts and run.json; envelopes and attempts in `skip` are left out."""
    skip = skip or set()
    listing = Listing()
    for p in run.all_files():
        rel = p.relative_to(run.path)
        name, attempt = rel.as_posix(), _attempt_dir(rel.parts)
        if ENVELOPE_RE.match(name) or (attempt is not None and attempt in skip):
            continue
        if attempt is not None and not (run.path / attempt / MANIFEST).is_file():
            if attempt not in listing.unsealed:
                listing.unsealed.append(attempt)
            continue
        listing.files[name] = sha256_file(p)
    check_manifests(run, listing)
    return listing


@dataclass
class StageView:
    """One stage's authoritative attempt as the decision reads it: its `result.json`, read once
    and checked against the attempt's manifest, and its `data` read into the stage's typed
    record (`qualify.registry.parse_record`) where the stage declares one and the data reads."""

    stage: str
    dir: Path
    result: StageResult
    record: StageRecord | None = None


@dataclass
class RunView:
    """Every stage's authoritative result of a run, each read once and hash-checked; a result
    that does not match its seal is left out and named in `problems`."""

    run: RunDir
    stages: dict[str, StageView] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def dirs(self) -> dict[str, Path]:
        return {name: v.dir for name, v in self.stages.items()}

    def records(self) -> dict[str, StageRecord]:
        """Each stage's typed record, for the stages whose data read into one."""
        return {name: v.record for name, v in self.stages.items() if v.record is not None}


def record_of(records: Mapping[str, StageRecord], stage: str, kind: type[R]) -> R | None:
    """`stage`'s record when it is a `kind` (the class the registry names for it), else None:
    the stage did not run, or its data did not read into its record."""
    got = records.get(stage)
    return got if isinstance(got, kind) else None


def _sealed_digest(attempt: Path, name: str) -> str | None:
    try:
        manifest = json.loads((attempt / MANIFEST).read_text())
        return str(manifest["files"][name]["sha256"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def run_view(run: RunDir, record: DecisionRecord) -> RunView:
    """The run as the decision document reads it (see `RunView`). An attempt without a
    manifest (still open) is read unchecked, as the decision lists it unsealed."""
    view = RunView(run)
    for s in record.evaluation.stages:
        if s.authoritative is None:
            continue
        here = run.path / s.stage / f"attempt-{s.authoritative.attempt:03d}"
        try:
            raw = (here / RESULT).read_bytes()
            result = StageResult.model_validate_json(raw)
        except (OSError, ValueError):
            continue
        sealed = _sealed_digest(here, RESULT)
        if sealed is not None and sealed != hashlib.sha256(raw).hexdigest():
            view.problems.append(f"{s.stage}/{here.name}/{RESULT}: differs from its manifest")
            continue
        try:
            typed = parse_record(s.stage, result.data)
        except ValidationError:
            typed = None  # evidence of a build whose data no record reads: presented as absent
        view.stages[s.stage] = StageView(s.stage, here, result, typed)
    return view
