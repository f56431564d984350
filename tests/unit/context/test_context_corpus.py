"""The shipped corpus and the documents built from it."""

from __future__ import annotations

import random
import re
from importlib import resources

from qualify.context import corpus
from qualify.context.corpus import KINDS, Needles, Source, document, messages


def test_every_kind_ships_real_text_named_in_sources() -> None:
    """Each content kind has its own file of real text, and SOURCES.md says where it came from."""
    root = resources.files("qualify").joinpath("data/corpus")
    sources = root.joinpath("SOURCES.md").read_text("utf-8")
    total = 0
    for kind in KINDS:
        text = corpus.text(kind)
        total += len(text.encode())
        assert len(text) > 50_000, kind
        assert f"`{kind}.txt`" in sources
    assert total < 400_000, "the corpus stays modest"


def test_no_runs_of_one_word() -> None:
    """The text is never made of repeated words: no word three times in a row anywhere."""
    for kind in KINDS:
        assert not re.search(r"\b(\w+)(?:\s+\1\b){2,}", corpus.text(kind)), kind


def test_kinds_differ() -> None:
    """Prose, list and code are different text, not one file three times."""
    heads = {corpus.text(k)[:2000] for k in KINDS}
    assert len(heads) == 3


def test_needles_sit_at_half_and_near_the_end() -> None:
    """In a long document the needles sit at about 50% and 99% of its characters."""
    needles = Needles.draw(random.Random(7))
    doc = document(Source("prose", 7), 200_000, needles)
    assert abs(doc.depths["50"] - 0.50) < 0.01
    assert abs(doc.depths["99"] - 0.99) < 0.01
    for n in needles.pair:
        assert doc.body.count(n.value) == 1


def test_long_document_reorders_passages_instead_of_repeating_words() -> None:
    """A body longer than its file goes on with the same paragraphs in another order."""
    src = Source("code", 3)
    one = len(corpus.text("code"))
    body, passes = src.take(int(one * 2.5))
    assert passes == 3
    second = body[one : one + 3000]
    assert second.strip() and second not in corpus.text("code")[:3000]


def test_take_is_prefix_consistent() -> None:
    """A shorter body is a prefix of a longer one, so token counts grow with characters."""
    src = Source("list", 1)
    short, _ = src.take(10_000)
    long, _ = src.take(20_000)
    assert long.startswith(short)
    assert len(short) <= 10_000


def test_needles_are_found_by_digits_only_when_named() -> None:
    """An answer names a needle only by its exact digits; separators inside a number are fine."""
    needles = Needles.draw(random.Random(11))
    a, b = needles.pair[0].value, needles.pair[1].value
    assert needles.found(f"{a} and {b}") == {"50": True, "99": True}
    assert needles.found(f"{a[:2]},{a[2:]} only") == {"50": True, "99": False}
    assert needles.found("nothing here") == {"50": False, "99": False}


def test_needle_values_never_occur_in_the_corpus() -> None:
    """A needle's number cannot be found by chance in the shipped text."""
    for seed in range(20):
        for n in Needles.draw(random.Random(seed)).pair:
            assert all(n.value not in corpus.text(k) for k in KINDS)


def test_the_nonce_opens_the_prompt() -> None:
    """The first message starts with the nonce, so the first cache block is per request."""
    needles = Needles.draw(random.Random(2))
    doc = document(Source("prose", 2), 3000, needles)
    a = messages(doc, needles, corpus.new_nonce())
    b = messages(doc, needles, corpus.new_nonce())
    assert a[0]["content"][:30] != b[0]["content"][:30]
    assert a[1] == b[1]
    assert needles.question in a[1]["content"]
