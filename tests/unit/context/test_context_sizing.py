"""Sizing prompts with the server's tokenizer in a handful of calls."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable

import pytest
from context_fake import FakeLlama, render, toy_tokens  # type: ignore[import-not-found]

from qualify.context.corpus import Needles, Source, document, messages
from qualify.context.sizing import CHARS_PER_TOKEN, Counter, SizingError, size, tolerance
from qualify.httpclient.client import Client


def _count_with_fake(kind: str, seed: int = 5) -> Callable[[int], object]:
    needles = Needles.draw(random.Random(seed))
    src = Source(kind, seed)  # type: ignore[arg-type]

    async def count(chars: int) -> int:
        return len(toy_tokens(render(messages(document(src, chars, needles), needles, "0" * 16))))

    return count


@pytest.mark.parametrize("kind", ["prose", "list", "code"])
@pytest.mark.parametrize("target", [1024, 7936, 131_072])
def test_lands_within_tolerance_in_few_counts(kind: str, target: int) -> None:
    """Every kind and size lands at or just under the target in at most five counts."""
    sized = asyncio.run(size(_count_with_fake(kind), target, CHARS_PER_TOKEN[kind], 8))  # type: ignore[arg-type]
    assert target - tolerance(target) <= sized.tokens <= target
    assert sized.within
    assert sized.calls <= 5, sized.steps


def test_a_million_tokens_takes_a_handful_of_counts() -> None:
    """A 1M-token prompt is sized in as few counts as a small one, not hundreds."""
    sized = asyncio.run(size(_count_with_fake("prose"), 1_000_000, 4.0, 8))  # type: ignore[arg-type]
    assert 1_000_000 - tolerance(1_000_000) <= sized.tokens <= 1_000_000
    assert sized.calls <= 5, sized.steps


def test_never_over_the_target() -> None:
    """When nothing lands in tolerance the largest prompt under the target is kept, never one
    over it."""

    async def coarse(chars: int) -> int:  # tokens jump by 50: tolerance cannot be met
        return 125 + (chars // 200) * 50

    sized = asyncio.run(size(coarse, 1000, 4.0, 6))
    assert sized.tokens <= 1000
    assert not sized.within


def test_target_below_the_fixed_part_is_an_error() -> None:
    """A target smaller than the template and question alone cannot be met, and says so."""

    async def overhead(chars: int) -> int:
        return 500 + chars // 4

    with pytest.raises(SizingError, match="no prompt of at most 100 tokens"):
        asyncio.run(size(overhead, 100, 4.0, 4))


def test_llamacpp_renders_once_then_one_tokenize_per_count(
    fake: FakeLlama, fake_client: Callable[[], Client]
) -> None:
    """On llama.cpp the template is rendered once; each count is then one /tokenize call, and
    the count equals what the server reports as prompt tokens."""
    msgs = [{"role": "system", "content": "Reference abc."}, {"role": "user", "content": "x y z"}]

    async def go() -> tuple[int, int, int]:
        counter = Counter(fake_client(), "llama.cpp", "m", {})
        a = await counter.count(msgs)
        b = await counter.count([msgs[0], {"role": "user", "content": "longer text here"}])
        return a, b, counter.calls

    a, b, calls = asyncio.run(go())
    assert a == len(toy_tokens(render(msgs)))
    assert b > a
    assert calls == 3
    assert fake.calls == {"/apply-template": 1, "/tokenize": 2}


def test_falls_back_to_usage_when_tokenize_is_missing(
    fake: FakeLlama, fake_client: Callable[[], Client]
) -> None:
    """Without /tokenize the count is the server's usage.prompt_tokens of a one-token answer."""
    fake.tokenize = False
    msgs = [{"role": "system", "content": "Reference abc."}, {"role": "user", "content": "x y"}]

    async def go() -> tuple[int, str]:
        counter = Counter(fake_client(), "vllm", "m", {})
        return await counter.count(msgs), counter.method

    n, method = asyncio.run(go())
    assert n == len(toy_tokens(render(msgs)))
    assert method == "usage.prompt_tokens"
    assert fake.chats[0]["max_tokens"] == 1
