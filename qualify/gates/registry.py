"""The check registry: one small async function per check, registered by name with its params."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from qualify.records import StrictModel, Verdict

if TYPE_CHECKING:
    from qualify.preflight.probe import GateContext

P = TypeVar("P", bound=StrictModel)
CHECK_MODULES = (
    "smoke",
    "json_output",
    "tool_calls",
    "tool_stream",
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


@dataclass(frozen=True)
class CheckSpec:
    """A registered check: its name, the model of its params, and the function that runs it."""

    name: str
    params: type[StrictModel]
    fn: CheckFn
    doc: str


CHECKS: dict[str, CheckSpec] = {}


def check(name: str, params: type[P]) -> Callable[[CheckFn], CheckFn]:
    """Register a check: `fn(ctx, params) -> Outcome`, called once per attempt."""

    def register(fn: CheckFn) -> CheckFn:
        CHECKS[name] = CheckSpec(name, params, fn, (fn.__doc__ or "").strip())
        return fn

    return register


def load_checks() -> dict[str, CheckSpec]:
    """Import every check module so each registers itself; returns the registry."""
    import importlib

    for mod in CHECK_MODULES:
        importlib.import_module(f"qualify.preflight.checks.{mod}")
    return CHECKS
