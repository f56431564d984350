"""The preflight, quality and vram records read every `result.json` of their stage the
repository holds and keep everything each one wrote; a record of this build writes back exactly
the JSON it was read from (plus `record_version`). Identity's are in
`test_identity_and_launch.py`, the A/B's, context's and capacity's beside their stages."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError
from stage_records import kept, published

from qualify.registry import parse_record, record_model

STAGES = ("preflight", "quality", "vram")
PUBLISHED = {s: published(s) for s in STAGES}
CASES = [(s, n, r) for s in STAGES for n, r in PUBLISHED[s]]


@pytest.mark.parametrize("stage", STAGES)
def test_the_repository_holds_results_of_the_stage(stage: str) -> None:
    assert len(PUBLISHED[stage]) >= (2 if stage == "quality" else 3)


@pytest.mark.parametrize("stage,name,result", CASES, ids=[n for _, n, _ in CASES])
def test_every_published_result_reads(stage: str, name: str, result: dict[str, Any]) -> None:
    model = record_model(stage)
    assert model is not None
    record = parse_record(stage, result["data"])
    assert isinstance(record, model)
    out = record.model_dump(mode="json")
    assert out.pop("record_version") == 1
    assert kept(out, result["data"])
    if set(out) == set(result["data"]):
        assert out == result["data"]
    assert model.model_validate(record.model_dump(mode="json")) == record


@pytest.mark.parametrize("stage", STAGES)
def test_a_record_of_this_build_writes_back_exactly_what_it_read(stage: str) -> None:
    """The published runs of this build: read and written again, the same JSON."""
    model = record_model(stage)
    assert model is not None
    exact = 0
    for _, result in PUBLISHED[stage]:
        record = model.model_validate(result["data"])
        exact += record.model_dump(mode="json") == {**result["data"], "record_version": 1}
    assert exact >= 2


@pytest.mark.parametrize("stage", STAGES)
def test_a_misspelt_field_is_refused(stage: str) -> None:
    model = record_model(stage)
    assert model is not None
    data = dict(PUBLISHED[stage][-1][1]["data"])
    data["levelz" if "levels" in data else "cardz"] = []
    with pytest.raises(ValidationError, match=r"levelz|cardz"):
        model.model_validate(data)
