"""The decision document's wording: numbers, durations and quantities as the template prints
them, one short line or table cell of at most `CELL_MAX` characters, each failure said once
(`Once`), a gate's reasons in one line."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from qualify.present.record import GateOutcome

CELL_MAX = 120
LINE_MAX = 160
UP = "../../"  # from decision/attempt-NNN/ to the run directory


def number(value: object, digits: int = 1) -> str:
    if value is None:
        return "no data"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    return f"{value:,.0f}" if isinstance(value, int) or digits == 0 else f"{value:,.{digits}f}"


def duration(value: object) -> str:
    """Seconds, shown in ms below one second (as operators read them)."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return "no data"
    return f"{value * 1000:,.0f} ms" if value < 1 else f"{value:,.2f} s"


def quantity(value: object, unit: str, digits: int = 1) -> str:
    if unit == "s":
        return duration(value)
    return number(value, digits) + (f" {unit}" if unit and value is not None else "")


def short(value: object, limit: int = LINE_MAX) -> str:
    """One line of at most `limit` characters; the rest lives in the evidence. A `<` is written
    `&lt;`, so that quoted markup (`<tool_response>`) shows instead of vanishing as an HTML tag
    when the document is rendered."""
    text = " ".join(str(value).split())
    text = text if len(text) <= limit else text[: limit - 1].rstrip() + "…"
    return text.replace("<", "&lt;")


def table_cell(value: object) -> str:
    """Text safe inside a markdown table cell, at most CELL_MAX characters."""
    return short(value, CELL_MAX).replace("|", "\\|")


@dataclass
class Once:
    """Each failure text is written once; later mentions name the gate key that holds it."""

    seen: dict[str, str] = field(default_factory=dict)

    def say(self, text: str, key: str) -> str:
        if text in self.seen:
            return f"as {self.seen[text]}"
        self.seen[text] = key
        return text


ATTEMPT_PREFIX = re.compile(r"^attempt \d+/\d+: ")


def reason_parts(g: GateOutcome) -> tuple[str, str]:
    """A gate's reasons as (how many attempts said it, what was said once, one line)."""
    texts = [ATTEMPT_PREFIX.sub("", r) for r in g.reasons]
    unique = list(dict.fromkeys(texts))
    count = f"{len(texts)} of {len(texts)} attempts: " if len(texts) > 1 == len(unique) else ""
    return count, short("; ".join(unique) or "no reason recorded")
