"""The A/B section reads the typed record, and so do the helpers the headline and caveats
call."""

from __future__ import annotations

import copy
from typing import Any

from qualify.ab.record import MetricRow, Record
from qualify.ab.section import (
    draft_share,
    paired_of,
    paired_text,
    runs_of,
    section,
)

METRIC = {
    "metric": "decode_tok_s",
    "unit": "tok/s",
    "better": "higher",
    "candidate": 12.0,
    "control": 10.0,
    "delta_pct": 20.0,
    "within_noise": False,
    "runs": {"candidate": 3, "control": 3},
    "paired": {
        "pairs": 9,
        "prompts": 3,
        "median_pct": 19.5,
        "ci95_pct": [10.0, 30.0],
        "too_few": False,
        "method": "percentile bootstrap over prompts",
    },
}
DATA: dict[str, Any] = {
    "runs": 3,
    "metrics": [METRIC],
    "acceptance": {"accepted": 30, "drafts": 10, "draft_tokens": 40},
    "lanes": {
        "candidate": {
            "name": "spec",
            "runs": [
                {
                    "run": 1,
                    "requests": [
                        {"prompt": "a", "completion_tokens": 60},
                        {"prompt": "b", "failed": "boom"},
                    ],
                }
            ],
        },
        "control": {"name": "plain"},
    },
}


def test_the_headline_helpers_read_the_typed_record() -> None:
    record = Record.model_validate(DATA)
    got = paired_of(record)
    assert {k: p.model_dump(mode="json") for k, p in got.items()} == {
        "decode_tok_s": METRIC["paired"]
    }
    assert paired_text(got["decode_tok_s"]).startswith("+19.5% (95% interval")
    assert paired_text(None) == "no per-request pairs recorded"
    assert runs_of(record.metrics[0]) == "3 run-level values"
    assert runs_of(MetricRow(metric="x")) == "run-level values (count not recorded)"
    assert record.acceptance is not None and record.acceptance.per_draft == 3.0
    assert draft_share(record) == (
        "10 drafts in 1 timed requests: accepted drafts gave 30 of 60 output tokens (50.0%); "
        "that is 2.00 tokens per engine step, and at 1.20x the control's decode each step took "
        "1.67x a control step's time"
    )


def test_acceptance_and_a_slowdown_are_reconciled_in_engine_steps() -> None:
    """The published vLLM A/B: 81% acceptance and 0.41x the control's decode. Steps are output
    tokens less accepted ones (2,693 - 1,119 = 1,574): 1.71 tokens a step, so each step took
    4.1x the control's; without a decode figure, no such sentence."""
    data = copy.deepcopy(DATA)
    data["acceptance"] = {"accepted": 1119, "drafts": 276, "draft_tokens": 1374}
    data["metrics"] = [{**METRIC, "candidate": 197.0, "control": 476.0}]
    data["lanes"]["candidate"]["runs"][0]["requests"] = [{"prompt": "a", "completion_tokens": 2693}]
    said = draft_share(Record.model_validate(data)) or ""
    assert said.endswith(
        "1.71 tokens per engine step, and at 0.41x the control's decode each "
        "step took 4.13x a control step's time"
    ), said
    data["metrics"] = []
    assert "engine step" not in (draft_share(Record.model_validate(data)) or "")


def test_the_section_of_a_stage_without_a_record_is_its_empty_form() -> None:
    got = section(None, [])
    assert got["ab"]["metrics"] == []
    assert got["ab"]["names"] == {"candidate": "candidate", "control": "control"}
    assert got["ab_lanes"] == [] and got["ab_power"] == []
    assert got["ab_gpu"]["rows"] == []
    shown = section(Record.model_validate(DATA), [])
    assert shown["ab"]["names"] == {"candidate": "spec", "control": "plain"}
    assert shown["ab"]["metrics"][0]["effect"].startswith("+19.5%")
