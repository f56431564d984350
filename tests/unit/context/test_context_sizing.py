"""Sizing prompts with the server's tokenizer in a handful of calls."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable

import pytest
from context_fake import FakeLlama, render, toy_tokens  # type: ignore[import-not-found]

from qualify.context.corpus import Needles, Source, document, messages, new_nonce
from qualify.context.sizing import (
    CHARS_PER_TOKEN,
    Counter,
    SizingError,
    fit,
    size,
    tolerance,
)
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
    assert sized.within_tolerance
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
    assert not sized.within_tolerance


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


def _letters(n: int) -> str:
    return "a" * n


async def _by_letters(nonce: str, chars: int) -> int:
    """A body of 4 characters a token behind a nonce whose letters are one token each."""
    return chars // 4 + sum(c.isalpha() for c in nonce)


def test_fit_keeps_a_nonce_that_counts_exactly() -> None:
    """A nonce as long in tokens as the warm one keeps the warm body: one count."""
    fitted = asyncio.run(fit(_by_letters, 1016, 4000, _letters, 8))
    assert (fitted.nonce, fitted.chars, fitted.tokens) == ("a" * 16, 4000, 1016)
    assert len(fitted.counts) == 1 and fitted.exact


def test_fit_a_small_miss_changes_the_nonce_not_the_body() -> None:
    """Three tokens over (the 256 → 259 case): a nonce three characters shorter, same body."""
    fitted = asyncio.run(fit(_by_letters, 1013, 4000, _letters, 8))
    assert (fitted.nonce, fitted.chars, fitted.tokens) == ("a" * 13, 4000, 1013)
    assert len(fitted.counts) == 2


def test_fit_a_large_miss_trims_the_body() -> None:
    fitted = asyncio.run(fit(_by_letters, 990, 4000, _letters, 8))
    assert fitted.exact and fitted.tokens == 990 and fitted.chars < 4000
    assert fitted.calls == len(fitted.counts) <= 8


def test_fit_never_lands_over_when_exact_is_out_of_reach() -> None:
    """Tokens that move in steps of two cannot hit an odd count: the largest under it wins."""

    async def coarse(nonce: str, chars: int) -> int:
        return 2 * (chars // 8) + 2 * len(nonce)

    fitted = asyncio.run(fit(coarse, 1033, 4000, _letters, 8))
    assert not fitted.exact and fitted.tokens == 1032
    assert len(fitted.counts) == 8


def test_cold_prompt_is_exact_after_its_nonce_on_the_server(
    fake: FakeLlama, fake_client: Callable[[], Client]
) -> None:
    """With digits one token each, a new hex nonce changes the prompt's count; fitted cold
    prompts come out at exactly the warm prompt's tokens, as the server would report them."""
    fake.split_digits = True
    needles = Needles.draw(random.Random(3))
    src = Source("prose", 3)

    async def go() -> tuple[int, list[int], list[int]]:
        counter = Counter(fake_client(), "llama.cpp", "m", {})

        async def count(nonce: str, chars: int) -> int:
            return await counter.count(messages(document(src, chars, needles), needles, nonce))

        warm = await count("0123456789abcdef", 3000)
        raw: list[int] = []
        fitted: list[int] = []
        for i in range(6):
            nonce = f"{i:x}" * 8 + "abcdefab"  # 10 tokens (digits, 2 letter pieces), not 12
            raw.append(await count(nonce, 3000))
            f = await fit(count, warm, 3000, new_nonce, 8)
            msgs = messages(document(src, f.chars, needles), needles, f.nonce)
            fitted.append(len(fake.tokens(render(msgs))))
        return warm, raw, fitted

    warm, raw, fitted = asyncio.run(go())
    assert any(n != warm for n in raw)  # the nonce alone would have moved the count
    assert fitted == [warm] * 6
