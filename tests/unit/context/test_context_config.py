"""Context settings in the candidate file."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest
from context_fake import FakeLlama  # type: ignore[import-not-found]
from pydantic import ValidationError

from qualify.context.settings import ContextSettings
from qualify.context.stage import plan_targets, window_of
from qualify.errors import BadInput
from qualify.httpclient.client import Client, Exchange
from qualify.pipeline import plan


def test_margin_must_hold_the_answer() -> None:
    """A completion margin smaller than max_tokens is refused, naming both values."""
    with pytest.raises(ValidationError, match=r"completion_margin \(32\).*max_tokens \(64\)"):
        ContextSettings(completion_margin=32, max_tokens=64)


def test_fewer_than_two_warmups_refused() -> None:
    """At least two warm-ups per size are required."""
    with pytest.raises(ValidationError, match="warmups"):
        ContextSettings(warmups=1)


def test_duplicate_targets_refused() -> None:
    """A target listed twice is refused."""
    with pytest.raises(ValidationError, match="targets lists a value twice"):
        ContextSettings(targets=[1024, 1024])


def test_targets_clamp_to_window_minus_margin() -> None:
    """A target over the window minus the margin is clamped and marked; others are kept."""
    rungs = plan_targets([1024, 3072, 16384], 8192, 256)
    assert [(r.target, r.planned_tokens, r.clamped) for r in rungs] == [
        (1024, 1024, False),
        (3072, 3072, False),
        (16384, 7936, True),
    ]


def test_targets_clamped_to_one_size_run_once() -> None:
    """Two targets that clamp to the same size are one rung: the later names the earlier."""
    rungs = plan_targets([3072, 16384, 32768], 8192, 256)
    assert [(r.target, r.planned_tokens, r.same_as) for r in rungs] == [
        (3072, 3072, None),
        (16384, 7936, None),
        (32768, 7936, 16384),
    ]


def _keep(label: str, ex: Exchange) -> list[str]:
    return [label]


def test_llamacpp_window_is_per_request_not_per_server(
    fake: FakeLlama, fake_client: Callable[[], Client]
) -> None:
    """`-c 32768 -np 4` gives a request 8,192 tokens: the ladder plans against that, not 32,768."""
    fake.n_ctx, fake.total_slots = 8192, 4
    window, source = asyncio.run(window_of("llama.cpp", 32768, fake_client(), _keep))
    assert (window, source) == (8192, "/props default_generation_settings.n_ctx (per slot)")
    assert plan_targets([16384], window, 256)[0].planned_tokens == 7936


def test_pinned_context_is_per_request_when_the_server_is_silent(
    fake: FakeLlama, fake_client: Callable[[], Client]
) -> None:
    """Without an n_ctx from the server, the pin is used as it is: what one request may use."""
    fake.n_ctx, fake.total_slots = None, 4
    window, source = asyncio.run(window_of("llama.cpp", 8192, fake_client(), _keep))
    assert (window, source) == (8192, "identity.context_length, per request (server reports none)")


def test_unknown_level_is_bad_input(tmp_path: Path) -> None:
    """A context level that is not one of the candidate's reasoning levels is refused, naming
    the field and the levels there are."""
    example = Path(__file__).resolve().parents[3] / "examples" / "smollm2"
    text = (example / "candidate.toml").read_text()
    (tmp_path / "candidate.toml").write_text(
        text.replace("warmups = 2", 'warmups = 2\nlevel = "deep"')
    )
    (tmp_path / "control.toml").write_text((example / "control.toml").read_text())
    with pytest.raises(BadInput) as info:
        plan(tmp_path / "candidate.toml")
    assert any(
        "stages.context.level: 'deep' is not a reasoning level" in line and "'off'" in line
        for line in info.value.render().splitlines()
    )
