"""Sizing a prompt with the server's own tokenizer, in a handful of calls.

The count is of the whole chat prompt as the server renders it (template included):
- llama.cpp: the template is rendered once by `/apply-template` with markers in place of the
  contents, then each candidate prompt is one `POST /tokenize` of the rendered text;
- vLLM and SGLang: `POST /tokenize` with the messages, one call per candidate;
- otherwise, or when those routes are missing: `usage.prompt_tokens` of a one-token completion.

Tokens grow almost linearly with characters, so a guess, one proportional correction and a
secant step or two land within tolerance whatever the size: a 1M-token prompt takes as few
calls as a 1K one.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

from qualify.context.record import ColdFit, NonceCount, Sizing
from qualify.httpclient.client import Client, Exchange
from qualify.serving.engine import adapter

Messages = Sequence[Mapping[str, object]]
Tools = list[dict[str, object]]
_SPECIAL = {"add_special": True, "parse_special": True}
# A first guess of characters per token, by content kind; the first count corrects it.
CHARS_PER_TOKEN = {"prose": 4.0, "list": 3.6, "code": 3.2}
_MARKS = ("\x01QSYS\x01", "\x01QUSER\x01")
# What `size` found: the record's form of a sized prompt (`qualify.context.record.Sizing`).
Sized = Sizing


class SizingError(Exception):
    """The server could not count a prompt (the rung is `error`)."""


@dataclass
class Counter:
    """Counts the tokens of a chat prompt on the server; every HTTP call is counted."""

    client: Client
    engine: str
    model: str
    fields: dict[str, object]
    method: str = ""
    calls: int = 0
    _wrap: tuple[str, str, str] | None = None

    async def _call(self, path: str, body: object) -> Exchange:
        self.calls += 1
        ex = await self.client.post(path, body)
        if ex.error_kind is not None:
            raise SizingError(f"POST {path} failed: {ex.error}")
        return ex

    async def count(self, msgs: Messages, tools: Tools | None = None) -> int:
        """The tokens of the chat prompt `msgs` (with `tools` declared, when given)."""
        if not self.method:
            self.method = adapter(self.engine).sizing
        n, extra = None, {"tools": tools} if tools else {}
        if self.method == "apply-template+tokenize":
            prompt = await (self._llamacpp(msgs) if tools is None else self._render(msgs, extra))
            n = None if prompt is None else await self._tokenize({"content": prompt, **_SPECIAL})
        elif self.method == "tokenize":
            kw = {k: v for k, v in self.fields.items() if k == "chat_template_kwargs"}
            n = await self._tokenize({"model": self.model, "messages": msgs, **extra, **kw})
        if n is None:
            self.method = "usage.prompt_tokens"
            n = await self._usage(msgs, extra)
        return n

    async def _render(self, msgs: Messages, extra: Mapping[str, object] = {}) -> str | None:
        ex = await self._call("/apply-template", {"messages": msgs, **extra, **self.fields})
        prompt = ex.body.get("prompt") if ex.ok and isinstance(ex.body, dict) else None
        return prompt if isinstance(prompt, str) else None

    async def _llamacpp(self, msgs: Messages) -> str | None:
        """llama.cpp's prompt: the template rendered once around markers, then filled in."""
        if self._wrap is None:
            marked = [{"role": m["role"], "content": k} for m, k in zip(msgs, _MARKS, strict=True)]
            rendered = await self._render(marked)
            if rendered is None:
                return None
            head, rest = rendered.split(_MARKS[0], 1) if _MARKS[0] in rendered else ("", "")
            mid, tail = rest.split(_MARKS[1], 1) if _MARKS[1] in rest else ("", "")
            self._wrap = (head, mid, tail) if rest and (mid or tail) else ("", "", "")
        if self._wrap == ("", "", ""):  # the template does not keep contents verbatim
            return await self._render(msgs)
        head, mid, tail = self._wrap
        return f"{head}{msgs[0]['content']}{mid}{msgs[1]['content']}{tail}"

    async def _tokenize(self, body: dict[str, object]) -> int | None:
        """`POST /tokenize`: its `count` (vLLM), else how many `tokens` it lists."""
        ex = await self._call("/tokenize", body)
        got = ex.body if ex.ok and isinstance(ex.body, dict) else {}
        count, tokens = got.get("count"), got.get("tokens")
        return (
            count if isinstance(count, int) else len(tokens) if isinstance(tokens, list) else None
        )

    async def _usage(self, msgs: Messages, extra: Mapping[str, object]) -> int:
        body = {"model": self.model, "messages": msgs, "max_tokens": 1, **extra, **self.fields}
        ex = await self._call("/v1/chat/completions", body)
        usage = ex.body.get("usage") if isinstance(ex.body, dict) else None
        n = usage.get("prompt_tokens") if isinstance(usage, dict) else None
        if not ex.ok or not isinstance(n, int):
            raise SizingError(f"no prompt_tokens to size with: HTTP {ex.status} {ex.body!r:.200}")
        return n


def tolerance(target: int) -> int:
    """How far under the target a sized prompt may land: 0.1%, at least 8 tokens."""
    return max(8, target // 1000)


def _next_chars(steps: list[tuple[int, int]], aim: float) -> int:
    c1, n1 = steps[-1]
    slope = n1 / c1 if c1 else 0.25
    for c0, n0 in reversed(steps[:-1]):
        if c0 != c1 and n0 != n1:
            slope = (n1 - n0) / (c1 - c0)
            break
    if slope <= 0:
        slope = n1 / max(c1, 1)
    step = (aim - n1) / slope
    nxt = c1 + (math.floor(step) if step > 0 else math.floor(step) - 1)
    tried = {c for c, _ in steps}
    while nxt in tried:  # a repeat would count the same text again
        nxt += 1 if aim > n1 else -1
    return max(nxt, 1)


async def size(
    count: Callable[[int], Awaitable[int]], target: int, chars_per_token: float, max_calls: int
) -> Sized:
    """The largest prompt of at most `target` tokens found within `max_calls` counts of
    `count(chars)` (the prompt built with a body of `chars` characters)."""
    tol = tolerance(target)
    aim = target - tol / 2
    steps: list[tuple[int, int]] = []
    chars = max(1, int(target * chars_per_token))
    while len(steps) < max_calls:
        n = await count(chars)
        steps.append((chars, n))
        if target - tol <= n <= target:
            break
        chars = _next_chars(steps, aim)
    fitting = [s for s in steps if s[1] <= target]
    if not fitting:
        raise SizingError(
            f"no prompt of at most {target} tokens in {len(steps)} counts "
            f"(smallest counted {min(n for _, n in steps)} tokens)"
        )
    chars, tokens = max(fitting, key=lambda s: s[1])
    return Sized(
        chars=chars,
        tokens=tokens,
        calls=len(steps),
        steps=[list(s) for s in steps],
        within_tolerance=target - tol <= tokens <= target,
    )


NONCE_CHARS = (8, 32)
"""Shortest and longest nonce (hex characters): 8 still makes every first cache block new."""


async def fit(
    count: Callable[[str, int], Awaitable[int]],
    want: int,
    chars: int,
    draw: Callable[[int], str],
    max_calls: int,
) -> ColdFit:
    """A prompt of exactly `want` tokens behind a fresh nonce (16 hex characters at first),
    re-measured after the nonce is in (`count(nonce, chars)`; `draw(n)`: n hex characters).

    A nonce's tokens vary with its digits (hex splits differently each time), so the warm
    prompt's body behind a new nonce can come out a few tokens off. A miss the nonce can absorb
    is fixed by the nonce: one character cut off its end (or added to it) per token over (or
    under), which moves the count by at most that many tokens, so it closes in from one side;
    the body, cut between words, moves in steps of several tokens. A larger miss trims or pads
    the body by secant steps. Without an exact hit, the largest count under `want` wins (never
    one over it, when one under it was seen).
    """
    lo, hi = NONCE_CHARS
    nonce, body = draw(16), chars
    tried: list[tuple[str, int, int]] = []
    steps: list[tuple[int, int]] = []  # body lengths tried behind the current nonce
    while len(tried) < max(1, max_calls):
        n = await count(nonce, body)
        tried.append((nonce, body, n))
        if n == want:
            break
        miss = n - want
        if lo <= len(nonce) - miss <= hi:
            nonce = nonce[: len(nonce) - miss] if miss > 0 else nonce + draw(-miss)
            steps = []
        else:
            steps.append((body, n))
            body = _next_chars(steps, want)
    under = [t for t in tried if t[2] <= want]
    _, chars, n = max(under, key=lambda t: t[2]) if under else min(tried, key=lambda t: t[2])
    counts = [NonceCount(nonce=x, chars=c, tokens=t) for x, c, t in tried]
    return ColdFit(
        tokens=n, want=want, exact=n == want, chars=chars, calls=len(tried), counts=counts
    )
