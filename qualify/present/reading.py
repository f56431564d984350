"""The run as a decision reads it, once (`RunView`): run.json, the candidate as run and every
listed attempt's result and typed record, each file read once and checked against the listing.

`conclude` builds it from the listing it signs, `render` from the listing of the run now, and
`verify` from the signed subjects; derive, policy, plots, document, statement and alias read it.
"""

from __future__ import annotations

import contextlib
import json
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import ValidationError

from qualify.candidate import Candidate
from qualify.evidence.listing import Listing, attempt_number, evidence_listing
from qualify.evidence.signing import sha256_bytes
from qualify.evidence.store import RESULT, RunDir
from qualify.records import StageRecord, StageResult
from qualify.registry import parse_record

if TYPE_CHECKING:
    from qualify.present.record import DecisionRecord

DECISION = "decision"
R = TypeVar("R", bound=StageRecord)


@dataclass
class StageView:
    """One listed attempt of a stage: its `result.json` (None while open, or when it has none
    or it does not read) and, read on first use, its `data` as the stage's typed record."""

    stage: str
    number: int
    dir: Path
    result: StageResult | None = None

    @cached_property
    def _typed(self) -> tuple[StageRecord | None, bool]:
        try:
            return parse_record(self.stage, self.result.data if self.result else {}), True
        except ValidationError:
            return None, False  # evidence of a build whose data no record reads: absent

    @property
    def record(self) -> StageRecord | None:
        """The typed record (`qualify.registry.parse_record`); None when the stage declares
        none, the data is empty, or it does not read (`reads` is then False)."""
        return self._typed[0]

    @property
    def reads(self) -> bool:
        return self._typed[1]


@dataclass
class RunView:
    """A run read once: run.json (`info`), the candidate copy (`copy`, None when the run has
    none), every listed attempt by stage in attempt order, and, once a decision counts them
    (`count`), each stage's authoritative attempt (`stages`); a file that is not what the
    listing names is named in `problems`."""

    run: RunDir
    listing: Listing
    info: dict[str, Any] = field(default_factory=dict)  # run.json, as written
    copy: str | None = None
    candidate: Candidate | None = None
    attempts: dict[str, list[StageView]] = field(default_factory=dict)
    stages: dict[str, StageView] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def count(self, record: DecisionRecord) -> RunView:
        """Each stage's authoritative attempt as `record` counted it, left out (and named)
        when its result broke its attempt's manifest."""
        broken = {p.split(": ", 1)[0] for p in self.listing.integrity}
        self.stages = {}
        for s in record.evaluation.stages:
            n = s.authoritative.attempt if s.authoritative else None
            got = next((a for a in self.attempts.get(s.stage, []) if a.number == n), None)
            if got is None or got.result is None:
                continue
            if f"{s.stage}/{got.dir.name}/{RESULT}" in broken:
                self.problems.append(
                    f"{s.stage}/{got.dir.name}/{RESULT}: differs from its manifest"
                )
                continue
            self.stages[s.stage] = got
        return self

    def records(self) -> dict[str, StageRecord]:
        """Each counted stage's typed record, for the stages whose data read into one."""
        return {name: v.record for name, v in self.stages.items() if v.record is not None}


def record_of(records: Mapping[str, StageRecord], stage: str, kind: type[R]) -> R | None:
    """`stage`'s record when it is a `kind` (the class the registry names for it), else None:
    the stage did not run, or its data did not read into its record."""
    got = records.get(stage)
    return got if isinstance(got, kind) else None


def read_run(
    run: RunDir, listing: Listing, copy: str | None, digests: Mapping[str, str] | None = None
) -> RunView:
    """`run` read once through `listing` (see `RunView`): each file checked against its digest
    in `digests` (default: the listing's) before it is parsed; `copy`, the candidate copy."""
    want = listing.files if digests is None else digests
    view = RunView(run, listing)

    def read(rel: str) -> bytes | None:
        try:
            raw = (run.path / rel).read_bytes()
        except OSError:
            return None
        if rel in want and want[rel] != sha256_bytes(raw):
            view.problems.append(f"{rel}: not the file the listing names (changed since)")
            return None
        return raw

    if "run.json" in listing.files and (written := read("run.json")) is not None:
        try:
            info = json.loads(written)
            view.info = info if isinstance(info, dict) else {}
        except ValueError:
            view.problems.append("run.json: not JSON")
    if copy is not None and (toml := read(copy)) is not None:
        view.copy = copy
        with contextlib.suppress(ValueError, ValidationError):  # not a candidate: None
            view.candidate = Candidate.model_validate(tomllib.loads(toml.decode()))
    for rel in sorted(listing.attempts() | set(listing.unsealed), key=attempt_number):
        stage = rel.split("/", 1)[0]
        if stage in (DECISION, "run"):
            continue
        got = StageView(stage, attempt_number(rel), run.path / rel)
        if f"{rel}/{RESULT}" in listing.files and (raw := read(f"{rel}/{RESULT}")) is not None:
            try:
                got.result = StageResult.model_validate_json(raw)
            except ValidationError as exc:
                view.problems.append(f"{rel}/{RESULT}: not a stage result ({exc})")
        view.attempts.setdefault(stage, []).append(got)
    return view


def run_view(run: RunDir, record: DecisionRecord) -> RunView:
    """The run as `record` was decided from it, read now (`render`, `export`): the evidence
    listed as it is, each stage's authoritative attempt counted as the record counts it."""
    return read_run(run, evidence_listing(run), record.candidate_copy).count(record)
