"""The preflight record reads every preflight `result.json` the repository holds and keeps
everything each one wrote; a record of this build writes back exactly the JSON it was read
from (plus `record_version`)."""

from __future__ import annotations

import json
import re
import tarfile
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from qualify.preflight.record import Record
from qualify.registry import parse_record

ROOT = Path(__file__).resolve().parents[3]
STAGE = "preflight"


def _published(stage: str) -> list[tuple[str, dict[str, Any]]]:
    """Every `<stage>/attempt-*/result.json` the repository holds: loose under docs/ and tests/,
    and inside the published evidence archives."""
    out = []
    for base in ("docs", "tests"):
        for p in sorted((ROOT / base).rglob(f"{stage}/attempt-*/result.json")):
            out.append((str(p.relative_to(ROOT)), json.loads(p.read_text())))
    for tar in sorted([*(ROOT / "docs").rglob("*.tgz"), *(ROOT / "tests").rglob("*.tgz")]):
        with tarfile.open(tar) as t:
            for m in t.getmembers():
                if m.isfile() and re.search(rf"/{stage}/attempt-\d+/result\.json$", m.name):
                    f = t.extractfile(m)
                    assert f is not None
                    out.append((f"{tar.relative_to(ROOT)}:{m.name}", json.loads(f.read())))
    return out


def _kept(out: Any, written: Any) -> bool:
    """True when everything `written` holds is in `out`, unchanged (`out` may add the fields an
    earlier build did not write, at their defaults)."""
    if isinstance(written, dict):
        return isinstance(out, dict) and all(
            k in out and _kept(out[k], v) for k, v in written.items()
        )
    if isinstance(written, list):
        return isinstance(out, list) and len(out) == len(written) and all(map(_kept, out, written))
    return bool(out == written)


PUBLISHED = _published(STAGE)


def test_the_repository_holds_preflight_results() -> None:
    assert len(PUBLISHED) >= 3


@pytest.mark.parametrize("name,result", PUBLISHED, ids=[n for n, _ in PUBLISHED])
def test_every_published_preflight_result_reads(name: str, result: dict[str, Any]) -> None:
    record = parse_record(STAGE, result["data"])
    assert isinstance(record, Record)
    out = record.model_dump(mode="json")
    assert out.pop("record_version") == 1
    assert _kept(out, result["data"])
    if set(out) == set(result["data"]):
        assert out == result["data"]
    assert Record.model_validate(record.model_dump(mode="json")) == record


def test_a_record_of_this_build_writes_back_exactly_what_it_read() -> None:
    """The published runs of this build: read and written again, the same JSON."""
    exact = 0
    for _, result in PUBLISHED:
        record = Record.model_validate(result["data"])
        exact += record.model_dump(mode="json") == {**result["data"], "record_version": 1}
    assert exact >= 2


def test_a_misspelt_field_is_refused() -> None:
    data = dict(PUBLISHED[-1][1]["data"])
    data["levelz" if "levels" in data else "cardz"] = []
    with pytest.raises(ValidationError, match=r"levelz|cardz"):
        Record.model_validate(data)
