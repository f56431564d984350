"""Identity against the real local llama-server: every pin judged through the llama.cpp adapter
from /v1/models, /props and the launch command qualify ran."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from qualify.identity.record import Record
from qualify.records import Verdict
from qualify.registry import parse_record

pytestmark = pytest.mark.integration


def test_identity_checks_every_pin(candidate_factory: Callable[..., Path], stage_runner) -> None:  # type: ignore[no-untyped-def]
    """The demo's pins all match what the server and its launch show, but the revision, which
    llama-server cannot report: that one is inconclusive, saying why."""
    cand = candidate_factory(18001, stages=["identity"])
    result = stage_runner(cand).stage("identity")
    verdicts = {g.gate: g.verdict for g in result.gates}
    assert verdicts.pop("pin@revision") is Verdict.INCONCLUSIVE
    assert set(verdicts.values()) == {Verdict.PASS}, result.reasons
    assert {"pin@quantization", "pin@context_length", "pin@speculation", "reachable"} <= set(
        verdicts
    )
    record = parse_record("identity", result.data)
    assert isinstance(record, Record)
    assert record.model_dump(mode="json") == result.data
    speculation = record.seen["speculation"]
    assert isinstance(speculation.value, dict) and speculation.value["draft_tokens"] == 64
    assert record.launch is not None and record.launch.kind == "local"
    assert [x.lane for x in record.launches] == ["candidate"]
    assert result.verdict is Verdict.INCONCLUSIVE


def test_identity_mismatch_fails_and_shows_both(
    candidate_factory: Callable[..., Path], stage_runner
) -> None:  # type: ignore[no-untyped-def]
    """A wrong quantization pin and a context pin over all slots both fail, showing both values."""
    cand = candidate_factory(
        18002,
        stages=["identity"],
        replace={
            'quantization = "Q4_1"': 'quantization = "Q8_0"',
            '"-np", "1"': '"-np", "2"',
            "max_num_seqs = 1": "max_num_seqs = 2",
        },
    )
    result = stage_runner(cand).stage("identity")
    assert result.verdict is Verdict.FAIL
    gates = {g.gate: g for g in result.gates}
    assert gates["pin@quantization"].verdict is Verdict.FAIL
    assert "'Q8_0'" in gates["pin@quantization"].reasons[0]
    assert "'Q4_1'" in gates["pin@quantization"].reasons[0]
    ctx = gates["pin@context_length"]
    assert ctx.verdict is Verdict.FAIL and "4096" in ctx.reasons[0], ctx.reasons
    assert gates["pin@max_num_seqs"].verdict is Verdict.PASS
