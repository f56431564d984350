"""Every published `result.json` of a stage, and the rule a typed record keeps what was written:
shared by the stage-record tests (`test_stage_records.py`, identity's in
`test_identity_and_launch.py`)."""

from __future__ import annotations

import json
import re
import tarfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]


def _unversioned(result: dict[str, Any]) -> dict[str, Any]:
    """The result with its data as an earlier build wrote it: a record sealed by this build
    carries its `record_version` (1), which the tests put back themselves."""
    data = dict(result.get("data") or {})
    assert data.pop("record_version", 1) == 1
    return {**result, "data": data}


def published(stage: str) -> list[tuple[str, dict[str, Any]]]:
    """Every `<stage>/attempt-*/result.json` the repository holds: loose under docs/ and tests/,
    and inside the published evidence archives (data without the `record_version` a record of
    this build writes)."""
    out = []
    for base in ("docs", "tests"):
        for p in sorted((ROOT / base).rglob(f"{stage}/attempt-*/result.json")):
            out.append((str(p.relative_to(ROOT)), _unversioned(json.loads(p.read_text()))))
    for tar in sorted([*(ROOT / "docs").rglob("*.tgz"), *(ROOT / "tests").rglob("*.tgz")]):
        with tarfile.open(tar) as t:
            for m in t.getmembers():
                if m.isfile() and re.search(rf"/{stage}/attempt-\d+/result\.json$", m.name):
                    f = t.extractfile(m)
                    assert f is not None
                    out.append(
                        (f"{tar.relative_to(ROOT)}:{m.name}", _unversioned(json.loads(f.read())))
                    )
    return out


def kept(out: Any, written: Any) -> bool:
    """True when everything `written` holds is in `out`, unchanged (`out` may add the fields an
    earlier build did not write, at their defaults)."""
    if isinstance(written, dict):
        return isinstance(out, dict) and all(
            k in out and kept(out[k], v) for k, v in written.items()
        )
    if isinstance(written, list):
        return isinstance(out, list) and len(out) == len(written) and all(map(kept, out, written))
    return bool(out == written)
