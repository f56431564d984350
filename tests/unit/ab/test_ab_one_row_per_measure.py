"""One interval per distinct measure: the published vLLM attach run's A/B (no token of it is
reasoning) has TTFO equal to first-visible TTFT in all 54 timed requests (48 counted), so its
table shows one row and one interval for both; one request where they differ brings the two
rows back."""

from __future__ import annotations

import copy
import json
import tarfile
from pathlib import Path
from typing import Any

from qualify.ab.record import Record
from qualify.ab.section import SAME_FIRST, ab_rows
from qualify.registry import parse_record

ROOT = Path(__file__).resolve().parents[3]
ATTACH = ROOT / "docs" / "gpu" / "vllm" / "evidence.tgz"
ATTACH_AB = (
    "evidence/smollm2-135m-vllm-h200-ngram-attach/20261203T133631Z-c43c9f/ab/attempt-001/"
    "result.json"
)


def _data() -> dict[str, Any]:
    with tarfile.open(ATTACH) as tf:
        f = tf.extractfile(ATTACH_AB)
        assert f is not None
        return json.load(f)["data"]  # type: ignore[no-any-return]


def _labels(data: dict[str, Any]) -> list[str]:
    record = parse_record("ab", data)
    assert isinstance(record, Record)
    return [m["label"] for m in ab_rows(record)["metrics"]]


def test_equal_measures_are_one_row() -> None:
    data = _data()
    requests = [q for lane in data["lanes"].values() for r in lane["runs"] for q in r["requests"]]
    assert len(requests) == 54  # 48 counted, 6 degenerate (excluded)
    assert all(q["ttfo_s"] == q["ttft_s"] for q in requests)
    labels = _labels(data)
    assert SAME_FIRST in labels
    assert "TTFO p50" not in labels and "First-visible TTFT p50" not in labels
    assert len(labels) == len(data["metrics"]) - 1


def test_one_request_apart_gives_two_rows() -> None:
    data = copy.deepcopy(_data())
    q = data["lanes"]["control"]["runs"][1]["requests"][0]
    q["ttft_s"] = q["ttfo_s"] + 0.004  # a reasoning token before the first visible one
    labels = _labels(data)
    assert "TTFO p50" in labels and "First-visible TTFT p50" in labels
    assert SAME_FIRST not in labels
