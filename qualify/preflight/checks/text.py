"""Garble detectors for visible text: leaked markup, special tokens, runs, script drift."""

from __future__ import annotations

import re
import unicodedata
from collections import Counter

# Reasoning and tool markup the server's parsers should have taken out of the visible answer.
MARKUP = re.compile(
    r"</?think>|</?tool_call>|</?tool_response>|</?tools>|<function=|</function>|<parameter="
)
# Chat-template special tokens: <|im_start|>, <|eot_id|>, <｜end▁of▁sentence｜>, [INST] ...
SPECIAL = re.compile(r"<\|[^|<>\s]{1,40}\|>|<｜[^｜]{1,40}｜>|\[/?INST\]|<s>|</s>")


def leaked_markup(text: str) -> list[str]:
    return sorted(set(MARKUP.findall(text)))


def longest_run(text: str) -> tuple[str, int]:
    """The longest run of one non-space character (the first, of runs as long), and its length."""
    m = max(re.finditer(r"(\S)\1*", text), key=lambda m: len(m.group(0)), default=None)
    return (m.group(1), len(m.group(0))) if m else ("", 0)


def drift(text: str, expected: str, max_share: float, min_letters: int) -> tuple[str, float] | None:
    """The foreign script and its share of the letters, when it exceeds `max_share`."""
    # each letter's script, from its Unicode name (LATIN, CYRILLIC, CJK, ...)
    names = (unicodedata.name(ch, "") for ch in text if ch.isalpha())
    counts = Counter(name.split(" ", 1)[0] for name in names if name)
    total = sum(counts.values())
    if total < min_letters:
        return None
    foreign = {s: n for s, n in counts.items() if s != expected}
    if not foreign:
        return None
    top = max(foreign, key=lambda s: foreign[s])
    share = sum(foreign.values()) / total
    return (top, share) if share > max_share else None


def garble(
    text: str,
    run_limit: int = 18,
    script: str = "LATIN",
    max_foreign_share: float = 0.2,
    min_letters: int = 20,
) -> list[str]:
    """Every sign of garble in a visible answer, each a specific reason; empty when clean."""
    problems = []
    if found := leaked_markup(text):
        problems.append(f"leaked reasoning or tool markup {found}")
    if found := sorted(set(SPECIAL.findall(text))):
        problems.append(f"special tokens in the visible answer {found}")
    ch, n = longest_run(text)
    if n >= run_limit:
        problems.append(f"character {ch!r} repeated {n} times in a row (limit {run_limit - 1})")
    if d := drift(text, script, max_foreign_share, min_letters):
        problems.append(
            f"drift into another script: {d[1]:.0%} of letters are not {script} (mostly {d[0]})"
        )
    return problems
