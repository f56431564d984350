"""What a stage's `qualify diff` cells are made of (its spec's `cells`): a `Cell` is what was
measured under one setting, holding `Measure`s, per-run values or counts
(`qualify.diff.figures` compares them)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

from pydantic import BaseModel

from qualify.httpclient.timing import median


class Drafted(Protocol):
    """Draft acceptance counts (`qualify.ab.record.Acceptance`)."""

    @property
    def draft_tokens(self) -> int | None: ...

    @property
    def accepted(self) -> int | None: ...


@dataclass
class Measure:
    unit: str
    better: str  # "higher" | "lower"
    values: list[float] = field(default_factory=list)
    counts: tuple[int, int] | None = None  # (successes, trials) for a rate
    # The independent units behind `counts` when its trials are not independent: draft tokens
    # come in requests whose answers decide them together, so the interval of a draft
    # acceptance rate is taken over its requests (at the rate the tokens give), not its tokens.
    units: int | None = None

    @property
    def figure(self) -> float | None:
        if self.counts is not None:
            s, n = self.counts
            return s / n if n else None
        return median(self.values)

    @property
    def n(self) -> int:
        return self.counts[1] if self.counts is not None else len(self.values)

    @property
    def trials(self) -> tuple[float, float] | None:
        """(successes, trials) for the rate's interval: over `units` where they are set."""
        if self.counts is None:
            return None
        s, n = self.counts
        if self.units is None or not n:
            return float(s), float(n)
        return self.units * s / n, float(self.units)


@dataclass
class Cell:
    group: str
    cell: str
    setting: dict[str, object]
    measures: dict[str, Measure] = field(default_factory=dict)
    stage: str = ""


def nums(xs: Iterable[float | int | None]) -> list[float]:
    return [float(x) for x in xs if isinstance(x, int | float) and not isinstance(x, bool)]


def given(model: BaseModel, names: tuple[str, ...]) -> dict[str, object]:
    """The named fields as the record wrote them: a field it did not write is None (not its
    default), so a run of an earlier build compares under the setting it recorded."""
    return {n: getattr(model, n) if n in model.model_fields_set else None for n in names}


def digest(obj: object) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()[:12]


def acceptance_rate(accepted: int, drafted: int, requests: int) -> Measure:
    """A draft acceptance rate over `requests` requests (its interval over requests)."""
    return Measure("rate", "higher", counts=(accepted, drafted), units=max(1, requests))


def drafted(acc: Drafted | None, requests: int) -> Measure | None:
    """Accepted over drafted tokens over `requests` requests, where any were drafted."""
    if acc is None or acc.draft_tokens is None or acc.draft_tokens <= 0:
        return None
    return acceptance_rate(int(acc.accepted or 0), acc.draft_tokens, requests)
