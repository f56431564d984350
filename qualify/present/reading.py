"""Reading a run for the decision: run.json, the candidate as run, each stage's authoritative
result and typed record (`RunView`); the evidence listing is `qualify.evidence.listing`."""

from __future__ import annotations

import hashlib
import json
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import ValidationError

from qualify.candidate import Candidate
from qualify.evidence.store import MANIFEST, RESULT, RunDir
from qualify.records import StageRecord, StageResult
from qualify.registry import parse_record

if TYPE_CHECKING:
    from qualify.present.record import DecisionRecord

DECISION = "decision"
R = TypeVar("R", bound=StageRecord)


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
