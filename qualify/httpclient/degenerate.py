"""Degenerate answers: text that a drafter can accept wholesale and that is not an answer.

A speculative drafter (n-gram, prompt lookup) accepts a repeating answer almost entirely, so a
stream of `1000000…` or of one phrase over and over decodes several times faster than a real
answer. Counted as speed it flatters the candidate; stages flag such answers, keep them as
evidence, leave them out of speed figures and list them.

The rules are deliberately narrow: a long run of one character or of digits, or one short
n-gram covering most of the answer. Ordinary prose, code and lists pass.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from qualify.records import Verdict

MIN_CHARS = 64  # shorter answers are never judged degenerate: too little text to tell
CHAR_RUN = 32  # a run of one character this long (outside whitespace) is degenerate
DIGIT_RUN = 48  # a run of digits this long with at most two distinct digits is degenerate
NGRAM_SHARE = 0.6  # one n-gram of 1 to 4 words repeated back to back over this share of words
MIN_WORDS = 16

_CHAR_RUN_RE = re.compile(rf"(\S)\1{{{CHAR_RUN - 1},}}")
_DIGITS_RE = re.compile(rf"\d{{{DIGIT_RUN},}}")
_WORD_RE = re.compile(r"\S+")


def _ngram_run(words: list[str], n: int) -> tuple[int, str]:
    """Longest back-to-back repetition of one n-gram: (words covered, the n-gram)."""
    best, best_gram = 0, ""
    i = 0
    while i + n <= len(words):
        gram = words[i : i + n]
        j = i + n
        while words[j : j + n] == gram:
            j += n
        covered = j - i
        if covered > best:
            best, best_gram = covered, " ".join(gram)
        i = j if covered > n else i + 1
    return best, best_gram


def degenerate(text: str) -> str | None:
    """Why this answer is degenerate (one line), or None when it reads as an answer."""
    if len(text) < MIN_CHARS:
        return None
    m = _CHAR_RUN_RE.search(text)
    if m:
        return f"a run of {len(m.group(0))} × {m.group(1)!r}"
    for d in _DIGITS_RE.finditer(text):
        if len(set(d.group(0))) <= 2:
            return f"a run of {len(d.group(0))} digits ({d.group(0)[:12]}…)"
    words = _WORD_RE.findall(text)
    if len(words) < MIN_WORDS:
        return None
    for n in range(1, 5):
        covered, gram = _ngram_run(words, n)
        if covered >= 2 * n and covered / len(words) >= NGRAM_SHARE:
            share = covered / len(words)
            return f"{gram[:40]!r} repeated over {share:.0%} of {len(words)} words"
    return None


def degenerate_verdict(
    flagged: Sequence[str], counted: int, allowed: int = 0
) -> tuple[Verdict, list[str]]:
    """The one rule every stage judges its degenerate answers by: (verdict, reasons).

    No counted answer is `inconclusive`: a pass must rest on answers that were read (the
    context ladder's rule, kept over the capacity stage's, which passed with nothing counted).
    More than `allowed` flagged (`flagged`: one line per answer, where and why) is `fail`, each
    listed; they are kept as evidence and left out of every speed figure."""
    if counted <= 0:
        return Verdict.INCONCLUSIVE, ["no counted stream to read"]
    if len(flagged) <= allowed:
        return Verdict.PASS, []
    return Verdict.FAIL, [f"{line}; left out of the speed figures" for line in flagged]
