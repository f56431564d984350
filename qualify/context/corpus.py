"""Long prompts from real text: a document of a chosen size, two needles, a unique first block.

The text ships in `qualify/data/corpus/` (see SOURCES.md there): prose, a list and code, because
the kind of content changes tokenization and decode speed. A document longer than its file goes
on with the file's paragraphs in a new seeded order, so passages repeat but words never do.
"""

from __future__ import annotations

import random
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Literal

from qualify.context.record import NeedleInfo

Kind = Literal["prose", "list", "code"]
KINDS: tuple[Kind, ...] = ("prose", "list", "code")
DEPTHS = (50, 99)
_PREFIX: dict[Kind, str] = {"prose": "", "list": "- ", "code": "# "}
_SUBJECTS = (
    "the vault code of the Amber Lighthouse",
    "the registry number of the ship Velmora",
)
# Digits separated by a comma, space or dash in an answer still name the same number.
DIGIT_GAP = re.compile(r"(?<=\d)[,\s.\-](?=\d)")


@cache
def text(kind: Kind) -> str:
    """The shipped text of one content kind."""
    return resources.files("qualify").joinpath(f"data/corpus/{kind}.txt").read_text("utf-8")


@cache
def paragraphs(kind: Kind) -> tuple[str, ...]:
    return tuple(p for p in re.split(r"\n\s*\n", text(kind)) if p.strip())


@cache
def _corpus() -> str:
    return "".join(text(k) for k in KINDS).lower()


def fresh(rng: random.Random, make: Callable[[random.Random], object], taken: set[str]) -> str:
    """A value `make` draws that the shipped text never holds and `taken` does not yet."""
    while True:
        v = str(make(rng))
        if v.lower() not in _corpus() and v not in taken:
            taken.add(v)
            return v


def five_digits(rng: random.Random) -> str:
    return str(rng.randint(10000, 99999))


def new_nonce(chars: int = 16) -> str:
    """`chars` random hex digits (16 unless a cold prompt's count needs another length)."""
    return secrets.token_hex((chars + 1) // 2)[:chars]


def needle_line(n: NeedleInfo, kind: Kind) -> str:
    return f"{_PREFIX[kind]}Note: {n.subject} is {n.value}."


@dataclass(frozen=True)
class Needles:
    """Two unique facts, at about 50% and 99% depth, and one question that asks for both."""

    pair: tuple[NeedleInfo, NeedleInfo]

    @classmethod
    def draw(cls, rng: random.Random) -> Needles:
        taken: set[str] = set()
        a, b = (
            NeedleInfo(depth=d, subject=s, value=fresh(rng, five_digits, taken))
            for d, s in zip(DEPTHS, _SUBJECTS, strict=True)
        )
        return cls((a, b))

    @property
    def ask(self) -> str:
        """The needles' question in a numbered list of several (`tasks.combined_question`)."""
        a, b = (n.subject for n in self.pair)
        return f"What are {a} and {b}? Give both numbers."

    @property
    def question(self) -> str:
        a, b = (n.subject for n in self.pair)
        return (
            f"Question: the document above states {a} and {b}. "
            "What are these two numbers? Answer with both numbers."
        )

    def found(self, answer: str) -> dict[str, bool]:
        """Which needles the answer names, by their exact digits."""
        flat = DIGIT_GAP.sub("", answer)
        return {str(n.depth): n.value in flat for n in self.pair}


@dataclass
class Source:
    """The text of one kind, extended on demand with reshuffled passes of its paragraphs."""

    kind: Kind
    seed: int
    _text: str = ""
    passes: int = 0
    _ends: list[int] = field(default_factory=list)

    def take(self, chars: int) -> tuple[str, int]:
        """The longest prefix of at most `chars` characters that ends between words, and how
        many passes over the file it spans."""
        while len(self._text) < chars + 1:
            self._extend()
        cut = self._text[: chars + 1]
        end = max(cut.rfind(" "), cut.rfind("\n"))
        out = cut[: end if end > 0 else chars].rstrip()
        used = next((i + 1 for i, e in enumerate(self._ends) if len(out) <= e), self.passes)
        return out, used

    def _extend(self) -> None:
        paras = list(paragraphs(self.kind))
        if self.passes:
            random.Random(self.seed * 1000 + self.passes).shuffle(paras)
        joined = "\n\n".join(paras)
        self._text = f"{self._text}\n\n{joined}" if self._text else joined
        self.passes += 1
        self._ends.append(len(self._text))


@dataclass(frozen=True)
class Document:
    body: str
    passes: int
    depths: dict[str, float]


def _insert_at(body: str, pos: int, line: str) -> tuple[str, int]:
    """Insert a line at the line break nearest `pos`; returns the text and where it went."""
    before = body.rfind("\n", 0, pos)
    after = body.find("\n", pos)
    candidates = [p for p in (before, after) if p >= 0]
    at = min(candidates, key=lambda p: abs(p - pos)) if candidates else len(body)
    return f"{body[:at]}\n{line}\n{body[at:].lstrip(chr(10))}", at


def document(
    source: Source,
    chars: int,
    needles: Needles,
    extra: list[tuple[int, str]] | tuple[tuple[int, str], ...] = (),
) -> Document:
    """A body of about `chars` characters with the needles at their depths (by character), and
    any `extra` lines (depth %, text: the tasks of `qualify.context.tasks`) at theirs."""
    raw, passes = source.take(max(chars, 1))
    prefix = _PREFIX[source.kind]
    placed = [(n.depth, needle_line(n, source.kind)) for n in needles.pair]
    placed += [(d, f"{prefix}{line}") for d, line in extra]
    # Deepest first, so a shallower insertion never moves a deeper one's anchor.
    body = raw
    for depth, line in sorted(placed, key=lambda p: -p[0]):
        body, _ = _insert_at(body, int(len(raw) * depth / 100), line)
    total = len(body)
    depths = {
        str(n.depth): round(body.find(needle_line(n, source.kind)) / total, 4) for n in needles.pair
    }
    return Document(body, passes, depths)


def system_prompt(nonce: str) -> str:
    # The nonce opens the prompt, so the first cache block differs for every cold request.
    return f"Reference {nonce}. Answer using only the document the user provides."


def messages(
    doc: Document, needles: Needles, nonce: str, question: str | None = None
) -> list[dict[str, str]]:
    """The system message (nonce first) and the document with its question (the needles'
    unless another is given: the rung's numbered questions, or one task's)."""
    return [
        {"role": "system", "content": system_prompt(nonce)},
        {"role": "user", "content": f"{doc.body}\n\n{question or needles.question}"},
    ]
