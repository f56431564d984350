"""Each stage's rebuild (what `finish` and `verify` derive a record with) returns the stage's
own typed record, the class the registry names and its judges read, and that record gives the
sealed `data` of the published run (docs/gpu, every stage) field for field."""

from __future__ import annotations

from pathlib import Path

import pytest
from rejudge_run import attempt_view, unpack

from qualify.evidence.kept import as_table, differences
from qualify.evidence.listing import evidence_listing
from qualify.evidence.store import RunDir
from qualify.present.reading import read_run
from qualify.registry import rebuild_of, record_model
from qualify.trust.rejudge import control_in_run

COPY = "run/attempt-001/candidate.toml"
STAGES = ("preflight", "context", "ab", "quality", "capacity", "vram")


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return unpack(tmp_path_factory.mktemp("published"))


@pytest.mark.parametrize("stage", STAGES)
def test_a_rebuild_returns_the_stages_own_record(run: Path, stage: str) -> None:
    files = {p.relative_to(run).as_posix(): "" for p in run.rglob("*") if p.is_file()}
    whole = read_run(RunDir(run), evidence_listing(RunDir(run)), COPY)
    view = attempt_view(run, f"{stage}/attempt-001", control_in_run(whole, files))
    fn, model = rebuild_of(stage), record_model(stage)
    assert fn is not None and model is not None
    rebuilt = fn(view)
    assert type(rebuilt) is model
    assert differences(view.sealed, rebuilt) == []
    assert as_table(model.model_validate(as_table(rebuilt))) == as_table(rebuilt)
