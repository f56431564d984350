"""Capacity prompts: a document of one content kind, sized with the server's tokenizer, behind a
new nonce for every request, and an instruction that asks for an answer of the same kind.

The kind shapes both the prompt and the answer, because decode speed depends on what is
generated (a drafter accepts a list or JSON far more readily than prose). Prose, list and code
come from the shipped corpus (`qualify.context.corpus`); JSON is the list's items as objects.
Sizing is `qualify.context.sizing`: `size` finds the body length once per (kind, length), then
`fit` gives each request's nonce the same token count (re-counted, never assumed).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from qualify.capacity.settings import DecodeKind
from qualify.context.corpus import Source, new_nonce, system_prompt
from qualify.context.sizing import CHARS_PER_TOKEN, Counter, Sized, fit, size

Messages = list[dict[str, str]]

INSTRUCTIONS: dict[DecodeKind, str] = {
    "prose": "Write a detailed summary of the document above in several paragraphs of prose.",
    "code": (
        "Write a Python module in the style of the code above: several functions with type "
        "hints and docstrings. Answer with code only."
    ),
    "json": (
        'Return a JSON array of objects with the keys "id", "title" and "summary", one for each '
        "of the first items above. Answer with JSON only."
    ),
    "list": 'List the items of the document above, one per line, each line starting with "- ".',
}
_GUESS = {"json": 3.0, **CHARS_PER_TOKEN}


def json_body(source: Source, chars: int) -> str:
    """The list's items as a JSON array of objects, cut at an object boundary near `chars`."""
    text, _ = source.take(max(2 * chars, 64))
    items = [ln.lstrip("- ").strip() for ln in text.splitlines() if ln.strip()]
    parts: list[str] = []
    used = 2
    for i, item in enumerate(items, 1):
        obj = json.dumps({"id": i, "item": item}, ensure_ascii=False)
        if parts and used + len(obj) + 2 > chars:
            break
        parts.append(obj)
        used += len(obj) + 2
    return "[\n" + ",\n".join(parts) + "\n]"


def body(kind: DecodeKind, seed: int, chars: int) -> str:
    if kind == "json":
        return json_body(Source("list", seed), chars)
    text, _ = Source(kind, seed).take(max(chars, 1))
    return text


def messages(kind: DecodeKind, text: str, nonce: str) -> Messages:
    return [
        {"role": "system", "content": system_prompt(nonce)},
        {"role": "user", "content": f"{text}\n\n{INSTRUCTIONS[kind]}"},
    ]


@dataclass
class Prompts:
    """Prompts of one kind and one length: sized once, then a fresh nonce for each request."""

    counter: Counter
    kind: DecodeKind
    seed: int
    max_calls: int
    sized: Sized | None = None
    fits: list[dict[str, Any]] = field(default_factory=list)

    async def size(self, target: int) -> Sized:
        """The largest body of at most `target` prompt tokens (raises SizingError)."""
        nonce = new_nonce()

        async def count(chars: int) -> int:
            return await self.counter.count(messages(self.kind, self.text(chars), nonce))

        self.sized = await size(count, target, _GUESS[self.kind], self.max_calls)
        return self.sized

    def text(self, chars: int) -> str:
        return body(self.kind, self.seed, chars)

    async def fresh(self) -> Messages:
        """A prompt behind a new nonce with the sized token count (raises SizingError)."""
        assert self.sized is not None, "size() first"
        sized = self.sized

        async def count(nonce: str, chars: int) -> int:
            return await self.counter.count(messages(self.kind, self.text(chars), nonce))

        fitted = await fit(count, sized.tokens, sized.chars, new_nonce, self.max_calls)
        self.fits.append(fitted.model_dump())
        return messages(self.kind, self.text(fitted.chars), fitted.nonce)
