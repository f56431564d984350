"""Fixtures for the context ladder's unit tests: the llama-server imitation and its client."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest
from context_fake import FakeLlama  # type: ignore[import-not-found]

from qualify.httpclient.client import Client


@pytest.fixture
def fake() -> FakeLlama:
    return FakeLlama()


@pytest.fixture
def fake_client(fake: FakeLlama) -> Callable[[], Client]:
    def make() -> Client:
        return Client("http://fake", transport=httpx.MockTransport(fake.handler))

    return make
