"""Identity against the real local llama-server."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from qualify.records import Verdict

pytestmark = pytest.mark.integration


def test_identity_passes_when_pins_match(
    candidate_factory: Callable[..., Path], stage_runner
) -> None:  # type: ignore[no-untyped-def]
    """Every pin the server reports matches the demo candidate's pins."""
    cand = candidate_factory(18001, stages=["identity"])
    result = stage_runner(cand).stage("identity")
    assert result.verdict is Verdict.PASS, result.reasons
    checked = {g.gate for g in result.gates}
    assert {"model", "context_length", "engine_build", "quantization"} <= checked


def test_identity_mismatch_fails_and_shows_both(
    candidate_factory: Callable[..., Path], stage_runner
) -> None:  # type: ignore[no-untyped-def]
    """A wrong quantization pin fails, naming the pinned and the reported value."""
    cand = candidate_factory(
        18002, stages=["identity"], replace={'quantization = "Q4_1"': 'quantization = "Q8_0"'}
    )
    result = stage_runner(cand).stage("identity")
    assert result.verdict is Verdict.FAIL
    assert any("'Q8_0'" in r and "'Q4_1'" in r for r in result.reasons), result.reasons
