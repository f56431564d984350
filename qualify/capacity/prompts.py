"""Capacity prompts: a document of one content kind (decode speed depends on what is generated),
sized with the server's tokenizer once per (kind, length), behind a new nonce for every request
re-counted to the same token count, and an instruction that asks for an answer of the same kind.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import partial

from qualify.capacity.settings import DecodeKind
from qualify.context.corpus import Source, new_nonce, system_prompt
from qualify.context.sizing import CHARS_PER_TOKEN, Counter, Sized, fit, size
from qualify.httpclient.load import Messages

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


def messages(kind: DecodeKind, seed: int, chars: int, nonce: str) -> Messages:
    """A body of `chars` characters of `kind` (the list's items as JSON for json) behind `nonce`."""
    if kind == "json":
        text = json_body(Source("list", seed), chars)
    else:
        text, _ = Source(kind, seed).take(max(chars, 1))
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

    async def _count(self, nonce: str, chars: int) -> int:
        return await self.counter.count(messages(self.kind, self.seed, chars, nonce))

    async def size(self, target: int) -> Sized:
        """The largest body of at most `target` prompt tokens (raises SizingError)."""
        count = partial(self._count, new_nonce())
        self.sized = await size(count, target, _GUESS[self.kind], self.max_calls)
        return self.sized

    async def fresh(self) -> Messages:
        """A prompt behind a new nonce with the sized token count (raises SizingError)."""
        assert self.sized is not None, "size() first"
        sized = self.sized
        fitted = await fit(self._count, sized.tokens, sized.chars, new_nonce, self.max_calls)
        return messages(self.kind, self.seed, fitted.chars, fitted.nonce)
