"""The check registry: every gate file names a registered check, with a model of its params.

Two kinds of check. A *probe* (preflight, quality) is async and talks to the server:
`fn(ctx, params) -> Outcome`, once per declared attempt. A *judge* (identity, context, ab, vram,
capacity) reads what its stage measured: `fn(data, params, thresholds) -> list[Judged]`, one item
per thing judged (a rung, a card, a pin); the gate file decides the severity and whether it is
critical, the stage decides nothing.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from qualify.records import StrictModel, Verdict
from qualify.registry import specs


@dataclass
class Outcome:
    """What one attempt of a gate concluded: a verdict, why, and the figures behind it."""

    verdict: Verdict
    reasons: list[str] = field(default_factory=list)
    metrics: dict[str, object] = field(default_factory=dict)

    @classmethod
    def passed(cls, metrics: dict[str, object] | None = None) -> Outcome:
        return cls(Verdict.PASS, [], metrics or {})

    @classmethod
    def failed(cls, *reasons: str, metrics: dict[str, object] | None = None) -> Outcome:
        return cls(Verdict.FAIL, list(reasons), metrics or {})

    @classmethod
    def errored(cls, *reasons: str, metrics: dict[str, object] | None = None) -> Outcome:
        return cls(Verdict.ERROR, list(reasons), metrics or {})


P = TypeVar("P", bound=Callable[..., Awaitable[Outcome]])  # a probe: `fn(ctx, params)`


@dataclass
class Judged:
    """One verdict a judge reached. `part` names which of several (a rung, a card, a pin): the
    gate is then reported as `<id>@<part>`; `None` is the gate as a whole."""

    verdict: Verdict
    reasons: list[str] = field(default_factory=list)
    metrics: Mapping[str, object] = field(default_factory=dict)
    part: str | None = None


J = TypeVar("J", bound=Callable[..., list[Judged]])  # a judge: `fn(data, params, thresholds)`
F = TypeVar("F", bound=Callable[..., object])


@dataclass(frozen=True)
class CheckSpec:
    """A registered check: its name, the model of its params, and the function that runs it."""

    name: str
    params: type[StrictModel]
    fn: Any  # a probe or a judge: called with the params of its gate file
    doc: str
    stage: str = "preflight"


def _origin(fn: object) -> str:
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"


class CheckRegistry(dict[str, CheckSpec]):
    """Checks by name. A name already taken by another function is refused, however it is set
    (a gate file names its check by name, so two checks of one name would leave which one runs
    to import order); the same function registered again (its module imported again) replaces
    itself."""

    def __setitem__(self, name: str, spec: CheckSpec) -> None:
        old = self.get(name)
        if old is not None and _origin(old.fn) != _origin(spec.fn):
            raise ValueError(
                f"check {name!r}: expected a new check name (got {_origin(spec.fn)}, "
                f"already registered by {_origin(old.fn)})"
            )
        super().__setitem__(name, spec)


CHECKS = CheckRegistry()


def _add(name: str, params: type[StrictModel], fn: F, stage: str) -> F:
    CHECKS[name] = CheckSpec(name, params, fn, (fn.__doc__ or "").strip(), stage)
    return fn


def check(name: str, params: type[StrictModel], stage: str = "preflight") -> Callable[[P], P]:
    """Register a probe of `stage`: `fn(ctx, params) -> Outcome`, called once per attempt."""
    return lambda fn: _add(name, params, fn, stage)


def judge(stage: str, name: str, params: type[StrictModel]) -> Callable[[J], J]:
    """Register a judge of `stage`: `fn(data, params, thresholds) -> list[Judged]`."""
    return lambda fn: _add(name, params, fn, stage)


def load_checks() -> dict[str, CheckSpec]:
    """Import the judges of every registered stage (its spec's `judges`: a package with every
    module in it), so each check registers itself; returns the registry."""
    import importlib
    import pkgutil

    for spec in list(specs().values()):
        for mod in spec.loaded.judges:
            for info in pkgutil.iter_modules(getattr(mod, "__path__", [])):
                importlib.import_module(f"{mod.__name__}.{info.name}")
    return CHECKS
