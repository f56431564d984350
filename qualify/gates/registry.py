"""The check registry: every gate file names a registered check, with a model of its params.

Two kinds of check. A *probe* (preflight, quality) is async and talks to the server:
`fn(ctx, params) -> Outcome`, once per declared attempt. A *judge* (identity, context, ab, vram,
capacity) reads what its stage measured: `fn(data, params, thresholds) -> list[Judged]`, one item
per thing judged (a rung, a card, a pin); the gate file decides the severity and whether it is
critical, the stage decides nothing.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from qualify.records import StrictModel, Verdict

if TYPE_CHECKING:
    from qualify.gates.thresholds import Thresholds
    from qualify.preflight.probe import GateContext

P = TypeVar("P", bound=StrictModel)
JUDGE_STAGES = ("identity", "context", "ab", "vram", "quality", "capacity")
CHECK_MODULES = (
    "smoke",
    "json_output",
    "tool_calls",
    "tool_result",
    "responses_api",
    "truncation",
    "over_length",
    "soft_empty",
    "garble",
)


@dataclass
class Outcome:
    """What one attempt of a gate concluded: a verdict, why, and the figures behind it."""

    verdict: Verdict
    reasons: list[str] = field(default_factory=list)
    metrics: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def passed(cls, metrics: dict[str, Any] | None = None) -> Outcome:
        return cls(Verdict.PASS, [], metrics or {})

    @classmethod
    def failed(cls, *reasons: str, metrics: dict[str, Any] | None = None) -> Outcome:
        return cls(Verdict.FAIL, list(reasons), metrics or {})

    @classmethod
    def errored(cls, *reasons: str, metrics: dict[str, Any] | None = None) -> Outcome:
        return cls(Verdict.ERROR, list(reasons), metrics or {})


CheckFn = Callable[["GateContext", Any], Awaitable[Outcome]]


@dataclass
class Judged:
    """One verdict a judge reached. `part` names which of several (a rung, a card, a pin): the
    gate is then reported as `<id>@<part>`; `None` is the gate as a whole."""

    verdict: Verdict
    reasons: list[str] = field(default_factory=list)
    metrics: dict[str, Any] = field(default_factory=dict)
    part: str | None = None


JudgeFn = Callable[[Any, Any, "Thresholds"], list[Judged]]


@dataclass(frozen=True)
class CheckSpec:
    """A registered check: its name, the model of its params, and the function that runs it."""

    name: str
    params: type[StrictModel]
    fn: Any
    doc: str
    stage: str = "preflight"
    kind: str = "probe"


CHECKS: dict[str, CheckSpec] = {}


def check(name: str, params: type[P]) -> Callable[[CheckFn], CheckFn]:
    """Register a check: `fn(ctx, params) -> Outcome`, called once per attempt."""

    def register(fn: CheckFn) -> CheckFn:
        CHECKS[name] = CheckSpec(name, params, fn, (fn.__doc__ or "").strip())
        return fn

    return register


def judge(stage: str, name: str, params: type[P]) -> Callable[[JudgeFn], JudgeFn]:
    """Register a judge of `stage`: `fn(data, params, thresholds) -> list[Judged]`."""

    def register(fn: JudgeFn) -> JudgeFn:
        CHECKS[name] = CheckSpec(name, params, fn, (fn.__doc__ or "").strip(), stage, "judge")
        return fn

    return register


def load_checks() -> dict[str, CheckSpec]:
    """Import every check module so each registers itself; returns the registry."""
    import importlib

    for mod in CHECK_MODULES:
        importlib.import_module(f"qualify.preflight.checks.{mod}")
    for stage in JUDGE_STAGES:
        try:
            importlib.import_module(f"qualify.{stage}.gates")
        except ModuleNotFoundError as exc:
            if exc.name not in (f"qualify.{stage}", f"qualify.{stage}.gates"):
                raise
    return CHECKS
