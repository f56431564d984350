"""The stage registry: every stage, declared once, in its order (the default `stages.run`).

Each stage's package exports its `SPEC` (a `StageSpec`): everything of the stage the rest of
qualify reads (its function, record, settings, judges, re-judging, document section, headline
figures, `qualify diff` cells, cause families, check code, whether the default house requires it).
`STAGES` says where each spec is, one line a stage, in order; a package installed beside qualify
declares more through the entry points `qualify.stages` (`name = "module:SPEC"`). This module
imports no stage: the specs are read on first use, their heavy parts behind `parts`.
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from importlib.metadata import entry_points
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Literal

from qualify.records import StageRecord, StageResult, StrictModel

if TYPE_CHECKING:
    from qualify.evidence.kept import AttemptView

GateKind = Literal["probe", "judge"]

# Where each stage's spec is (`module:attribute`, as an entry point says it), in the order of the
# default `stages.run`: vram last, since it judges the sampler's series of every stage before it.
STAGES: list[str] = [
    "qualify.identity:SPEC",
    "qualify.preflight:SPEC",
    "qualify.quality:SPEC",
    "qualify.context:SPEC",
    "qualify.capacity:SPEC",
    "qualify.ab:SPEC",
    "qualify.vram:SPEC",
]
ENTRY_POINTS = "qualify.stages"


@dataclass(frozen=True)
class StageParts:
    """The parts of a stage that import the rest of qualify, read when first asked for (each
    one's signature and use: the table in docs/architecture.md, "The registry")."""

    run: Callable[..., Awaitable[StageResult]]
    record: type[StageRecord] | None = None
    judges: tuple[ModuleType, ...] = ()
    rebuild: Callable[[AttemptView], StageRecord] | None = None
    section: Callable[..., Mapping[str, object]] | None = None
    plots: Callable[..., list[Any]] | None = None
    figures: Callable[..., list[str]] | None = None
    cells: Callable[..., list[Any]] | None = None
    again: Callable[..., tuple[list[str], list[str]]] | None = None
    sampler: Callable[..., Any] | None = None
    plan_note: Callable[..., str] | None = None

    @classmethod
    def of(
        cls,
        run: Callable[..., Awaitable[StageResult]],
        record: type[StageRecord],
        section: ModuleType,
        *judges: ModuleType,
        **more: Any,  # any other part, by its name
    ) -> StageParts:
        """The parts of a stage whose `section` module holds its `section` and whichever of
        `figures`, `diff_cells` (its `cells`) and `plots` it has; `more`, any other part."""
        return cls(
            run=run,
            record=record,
            judges=judges,
            section=section.section,
            figures=getattr(section, "figures", None),
            cells=getattr(section, "diff_cells", None),
            plots=getattr(section, "plots", None),
            **more,
        )


@dataclass(frozen=True, eq=False)
class StageSpec:
    """One stage, declared: plain data, its settings model and partial, and `parts`, the
    function returning its `StageParts` (every field: docs/architecture.md, "The registry")."""

    name: str
    parts: Callable[[], StageParts]
    gates: GateKind = "judge"
    default: bool = True
    required: bool = True
    critical: bool = False
    last: bool = False
    lead: bool = False
    settings: type[StrictModel] | None = None
    partial: Path | None = None
    unjudged: str = ""
    causes: Mapping[str, str] = field(default_factory=dict)
    check_code: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.name.isidentifier() or not self.name.islower():
            raise ValueError(f"stage name: expected a lower-case identifier (got {self.name!r})")

    @cached_property
    def loaded(self) -> StageParts:
        """Its parts, imported on first use."""
        return self.parts()


_SPECS: dict[str, StageSpec] = {}


def specs() -> dict[str, StageSpec]:
    """Every declared stage's spec, by name, in order: `STAGES`, then the entry points."""
    if not _SPECS:
        for ref in STAGES + [ep.value for ep in entry_points(group=ENTRY_POINTS)]:
            module, _, attr = ref.partition(":")
            spec = getattr(importlib.import_module(module), attr or "SPEC")
            if not isinstance(spec, StageSpec):
                raise TypeError(f"{ref}: expected a StageSpec (got {type(spec).__name__})")
            register_stage(spec)
    return _SPECS


def register_stage(spec: StageSpec, before: str | None = None) -> StageSpec:
    """Declare a stage, last in the order (or just before the stage `before`). A name declared
    twice is refused: two stages of one name would share evidence and gate files."""
    if spec.name in _SPECS:
        raise ValueError(f"stage {spec.name!r}: expected a new stage name (already registered)")
    if before is not None and before not in _SPECS:
        raise ValueError(f"before: expected a registered stage (got {before!r})")
    items = list(_SPECS.items())
    at = len(items) if before is None else [n for n, _ in items].index(before)
    items.insert(at, (spec.name, spec))
    _SPECS.clear()
    _SPECS.update(items)
    return spec


def reload() -> None:
    """Read `STAGES` and the entry points again on next use (a test that adds a line)."""
    _SPECS.clear()


def unregister_stage(name: str) -> None:
    """Remove a declared stage (tests that declare a stage of their own)."""
    specs().pop(name, None)


def stage_names() -> tuple[str, ...]:
    """Every declared stage, in the registry's order."""
    return tuple(specs())


def default_run() -> list[str]:
    """The stages a candidate runs when its `stages.run` names none."""
    return [s.name for s in specs().values() if s.default]


def judged_stages() -> tuple[str, ...]:
    """The stages whose gate files are judges over what the stage measured."""
    return tuple(s.name for s in specs().values() if s.gates == "judge")


def probe_stages() -> tuple[str, ...]:
    """The stages whose gate files each ask the server, attempt by attempt."""
    return tuple(s.name for s in specs().values() if s.gates == "probe")


def led() -> list[StageSpec]:
    """The specs with the `lead` ones first (the order of headline figures and diff cells)."""
    return sorted(specs().values(), key=lambda s: not s.lead)


def run_order(names: list[str]) -> list[str]:
    """The stages a candidate names, in the order they run: as listed, the `last` ones last."""
    last = {s.name for s in specs().values() if s.last}
    return [n for n in names if n not in last] + [n for n in names if n in last]


def record_model(name: str) -> type[StageRecord] | None:
    """The typed record class a declared stage writes, or None when it declares none."""
    spec = specs().get(name)
    return spec.loaded.record if spec else None


def parse_record(name: str, data: dict[str, object]) -> StageRecord | None:  # raw result.json data
    """`result.json`'s `data` of stage `name`, read into its typed record (validation errors
    propagate: a record that does not read is never guessed at). None when the stage declares
    no record or the data is empty (a stage that stopped before measuring)."""
    model = record_model(name)
    if model is None or not data:
        return None
    return model.model_validate(data)


def rebuild_of(name: str) -> Callable[[AttemptView], StageRecord] | None:
    """The function deriving a declared stage's record from what its attempt kept, or None."""
    spec = specs().get(name)
    return spec.loaded.rebuild if spec else None


def required_patterns() -> list[str]:
    """The default house policy's `required` gate patterns: every stage whose spec says so."""
    return [f"{s.name}/*" for s in specs().values() if s.required]


def critical_patterns() -> list[str]:
    """The default house policy's `critical` gate patterns: every stage whose spec says so."""
    return [f"{s.name}/*" for s in specs().values() if s.critical]
