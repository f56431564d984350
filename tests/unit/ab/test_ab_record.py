"""The A/B record reads every A/B `result.json` the repository holds, and its JSON form is the
data as written (plus `record_version`)."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from qualify.ab.record import Record
from qualify.registry import parse_record

ROOT = Path(__file__).resolve().parents[3]
ARCHIVES = ["docs/gpu/evidence.tgz", "docs/gpu/vllm/evidence.tgz"]


def _published() -> list[tuple[str, dict[str, Any]]]:
    """Every A/B result.json: loose under docs/ and tests/, and inside the archives."""
    out = []
    for base in ("docs", "tests"):
        for p in sorted((ROOT / base).rglob("ab/attempt-*/result.json")):
            out.append((str(p.relative_to(ROOT)), json.loads(p.read_text())))
    tars = [ROOT / a for a in ARCHIVES] + sorted((ROOT / "tests/golden/recorded").glob("*.tgz"))
    for tar in tars:
        with tarfile.open(tar) as t:
            for m in t.getmembers():
                if m.isfile() and m.name.endswith("/result.json") and "/ab/" in m.name:
                    f = t.extractfile(m)
                    assert f is not None
                    out.append((f"{tar.name}:{m.name}", json.loads(f.read())))
    return out


PUBLISHED = _published()


def test_the_repository_holds_ab_results() -> None:
    assert len(PUBLISHED) >= 5
    assert any("vllm" in n for n, _ in PUBLISHED)


@pytest.mark.parametrize("name,result", PUBLISHED, ids=[n for n, _ in PUBLISHED])
def test_every_published_ab_result_reads(name: str, result: dict[str, Any]) -> None:
    record = parse_record("ab", result["data"])
    assert isinstance(record, Record)
    assert record.model_dump(mode="json") == {**result["data"], "record_version": 1}
    assert Record.model_validate(record.model_dump(mode="json")) == record
    assert set(record.lanes) == {"candidate", "control"}
    assert record.row("decode_tok_s") is not None


def test_a_misspelt_or_mistyped_field_is_refused() -> None:
    data = PUBLISHED[0][1]["data"]
    bad = json.loads(json.dumps(data))
    bad["lanes"]["candidate"]["runs"][0]["requests"][0]["decode_toks"] = 1.0
    with pytest.raises(ValidationError, match="decode_toks"):
        Record.model_validate(bad)
    bad = json.loads(json.dumps(data))
    bad["lanes"]["referee"] = bad["lanes"]["control"]
    with pytest.raises(ValidationError, match="referee"):
        Record.model_validate(bad)


def test_the_record_keeps_every_setting_the_stage_has() -> None:
    """`settings` is `stages.ab` as dumped: the record names every field ABSettings has."""
    from qualify.ab.record import Settings
    from qualify.ab.settings import ABSettings

    dumped = ABSettings(control="control.toml").model_dump(mode="json")
    assert set(ABSettings.model_fields) <= set(Settings.model_fields)
    assert Settings.model_validate(dumped).model_dump(mode="json") == dumped
