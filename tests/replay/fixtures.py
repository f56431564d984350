"""Pytest fixtures that start a replay server on loopback and yield it.

Use in a test module (or a conftest) with `from replay.fixtures import replay, replay_factory`:

    def test_x(replay_factory):
        r = replay_factory(vllm_profile(spec=Spec()))
        httpx.get(f"{r.base_url}/metrics")

`replay` is a vLLM 0.33 replay with default settings; a candidate under test attaches to it with
`[server] attach = true` and `base_url = r.base_url`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from .server import Profile, Replay, vllm_profile


@pytest.fixture
def replay_factory() -> Iterator[Callable[[Profile], Replay]]:
    started: list[Replay] = []

    def start(profile: Profile) -> Replay:
        r = Replay(profile).__enter__()
        started.append(r)
        return r

    yield start
    for r in started:
        r.__exit__(None, None, None)


@pytest.fixture
def replay(replay_factory: Callable[[Profile], Replay]) -> Replay:
    return replay_factory(vllm_profile())
