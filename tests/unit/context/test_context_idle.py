"""The engine-idle check."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from context_fake import FakeLlama  # type: ignore[import-not-found]

from qualify.httpclient.client import Client
from qualify.serving.dialects import LLAMACPP, VLLM
from qualify.serving.idle import wait_idle


def test_waits_for_a_busy_engine(fake: FakeLlama, fake_client: Callable[[], Client]) -> None:
    """A busy engine is polled until it reports no running and no waiting request."""
    fake.busy_scrapes = 2
    rep = asyncio.run(wait_idle(fake_client(), LLAMACPP, 5.0, poll_s=0.01))
    assert rep.idle is True
    assert rep.polls == 3


def test_busy_past_the_timeout_is_not_idle(
    fake: FakeLlama, fake_client: Callable[[], Client]
) -> None:
    """An engine still busy when time is up is reported busy, with the gauges it showed."""
    fake.busy_scrapes = 10_000
    rep = asyncio.run(wait_idle(fake_client(), LLAMACPP, 0.05, poll_s=0.01))
    assert rep.idle is False
    assert rep.running == 1
    assert "running=1" in rep.reason


def test_no_metrics_is_unknown_not_idle(fake: FakeLlama, fake_client: Callable[[], Client]) -> None:
    """Without /metrics the engine's state is unknown (None), never taken for idle."""
    fake.metrics = False
    rep = asyncio.run(wait_idle(fake_client(), LLAMACPP, 1.0))
    assert rep.idle is None
    assert "HTTP 501" in rep.reason


def test_missing_gauges_are_unknown(fake: FakeLlama, fake_client: Callable[[], Client]) -> None:
    """Metrics without this engine's gauge names give unknown, naming the gauges looked for."""
    rep = asyncio.run(wait_idle(fake_client(), VLLM, 1.0))
    assert rep.idle is None
    assert "vllm:num_requests_running" in rep.reason
