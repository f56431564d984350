"""Fixtures for the context ladder's unit tests: the llama-server imitation and its client; the
GPU sampler stand-in of the VRAM tests (fake_parts) made importable."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from context_fake import FakeLlama  # type: ignore[import-not-found]

from qualify.httpclient.client import Client

sys.path.insert(0, str(Path(__file__).parents[1] / "vram"))  # fake_parts


@pytest.fixture
def fake() -> FakeLlama:
    return FakeLlama()


@pytest.fixture
def fake_client(fake: FakeLlama) -> Callable[[], Client]:
    def make() -> Client:
        return Client("http://fake", transport=httpx.MockTransport(fake.handler))

    return make
