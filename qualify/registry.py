"""The stage registry: every stage, declared once, in its order (the default `stages.run`).

Every list of stages reads this registry: the order `load_all` imports them in, the `stage`
a gate file may name, the folders gate files are loaded from, the modules whose checks
register themselves, the project's gate files `qualify validate` loads. It imports nothing of
the stages themselves, so any module may read it (the gate machinery, the candidate model).

A stage's package holds its settings, its stage function (`stage.py`, registered with
`qualify.stage.stage`), its checks and its gate files (`gates/<name>/*.yaml`); adding a stage
is its package and one `register_stage` line.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Literal

from qualify.records import StageRecord, StrictModel

GateKind = Literal["probe", "judge"]


@dataclass(frozen=True)
class StageSpec:
    """One stage, declared.

    `gates`: how its gate files run. `probe`: each asks the server, attempt by attempt
    (`qualify.gates.runner.run_gate`), and the stage checks the gate files it selects in its own
    validator; `judge`: each reads what the stage measured (`StageContext.judge`).
    `default`: in a candidate's default `stages.run`.
    `last`: runs after every other stage a candidate names, whatever its place in `stages.run`
    (vram: it judges the sampler's series of every stage before it).
    `stage_module`: the module whose import registers the stage function.
    `check_modules`: modules whose import registers its checks; a package is imported with every
    module in it. A module this build does not have is skipped.
    `record`: `module:Class` of the typed record the stage writes (`qualify.records.StageRecord`).
    `section`: the module that presents the stage in the decision document (its section and
    plots), a pure function of the stage's record and gates.
    `settings`: `module:Class` of its `[stages.<name>]` table (a `StrictModel`); a stage whose
    package has no such class has no table.
    `rebuild`: `module:function` deriving the stage's record (and, for a probe stage, its gates)
    from the files its attempt kept (`qualify.evidence.kept.AttemptView`): `qualify.stage.finish`
    judges the stage with it, `verify` runs it again; None: the stage has none.
    `sampler`: `module:function` started before the run's first stage when the stage runs, with
    the candidate and the run; it is told each stage as it starts (`mark`), stopped before the
    `last` stages, and handed to every stage (`StageContext.sampler`).
    """

    name: str
    gates: GateKind = "judge"
    default: bool = True
    last: bool = False
    stage_module: str = ""
    check_modules: tuple[str, ...] = ()
    record: str = ""
    section: str = ""
    settings: str = ""
    sampler: str = ""
    rebuild: str | None = ""

    def __post_init__(self) -> None:
        if not self.name.isidentifier() or not self.name.islower():
            raise ValueError(f"stage name: expected a lower-case identifier (got {self.name!r})")
        if not self.stage_module:
            object.__setattr__(self, "stage_module", f"qualify.{self.name}.stage")
        if not self.check_modules:
            pkg = f"qualify.{self.name}"
            object.__setattr__(self, "check_modules", (f"{pkg}.judges", f"{pkg}.gates"))
        if not self.record:
            object.__setattr__(self, "record", f"qualify.{self.name}.record:Record")
        if not self.section:
            object.__setattr__(self, "section", f"qualify.{self.name}.section")
        if not self.settings:
            object.__setattr__(self, "settings", f"qualify.{self.name}.settings:Settings")
        if self.rebuild == "":
            object.__setattr__(self, "rebuild", f"qualify.{self.name}.rebuild:rebuild")


SPECS: dict[str, StageSpec] = {}


def register_stage(spec: StageSpec, before: str | None = None) -> StageSpec:
    """Declare a stage, last in the order (or just before the stage `before`). A name declared
    twice is refused: two stages of one name would share evidence and gate files."""
    if spec.name in SPECS:
        raise ValueError(f"stage {spec.name!r}: expected a new stage name (already registered)")
    if before is not None and before not in SPECS:
        raise ValueError(f"before: expected a registered stage (got {before!r})")
    items = list(SPECS.items())
    at = len(items) if before is None else [n for n, _ in items].index(before)
    items.insert(at, (spec.name, spec))
    SPECS.clear()
    SPECS.update(items)
    return spec


def unregister_stage(name: str) -> None:
    """Remove a declared stage (tests that declare a stage of their own)."""
    SPECS.pop(name, None)


def stage_names() -> tuple[str, ...]:
    """Every declared stage, in the registry's order."""
    return tuple(SPECS)


def default_run() -> list[str]:
    """The stages a candidate runs when its `stages.run` names none."""
    return [s.name for s in SPECS.values() if s.default]


def judged_stages() -> tuple[str, ...]:
    """The stages whose gate files are judges over what the stage measured."""
    return tuple(s.name for s in SPECS.values() if s.gates == "judge")


def probe_stages() -> tuple[str, ...]:
    """The stages whose gate files each ask the server, attempt by attempt."""
    return tuple(s.name for s in SPECS.values() if s.gates == "probe")


def last_stages() -> tuple[str, ...]:
    """The stages that run after every other stage a candidate names."""
    return tuple(s.name for s in SPECS.values() if s.last)


def run_order(names: list[str]) -> list[str]:
    """The stages a candidate names, in the order they run: as listed, the `last` ones last."""
    last = last_stages()
    return [n for n in names if n not in last] + [n for n in names if n in last]


def spec_of(name: str) -> StageSpec | None:
    return SPECS.get(name)


def _optional_module(name: str) -> ModuleType | None:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name is None or not (name == exc.name or name.startswith(exc.name + ".")):
            raise
        return None


def _attribute(ref: str, default: str) -> Any:
    module_name, _, attr = ref.partition(":")
    module = _optional_module(module_name)
    return getattr(module, attr or default, None) if module else None


def settings_model(name: str) -> type[StrictModel] | None:
    """The model of a declared stage's `[stages.<name>]` table, or None when it has none."""
    spec = SPECS.get(name)
    model = _attribute(spec.settings, "Settings") if spec else None
    return model if isinstance(model, type) and issubclass(model, StrictModel) else None


def sampler_of(name: str) -> Callable[..., Any] | None:
    """The function that starts a declared stage's background sampler, or None."""
    spec = SPECS.get(name)
    start = _attribute(spec.sampler, "start") if spec and spec.sampler else None
    return start if callable(start) else None


def record_model(name: str) -> type[StageRecord] | None:
    """The typed record class a declared stage writes, or None when its package declares none."""
    spec = SPECS.get(name)
    if spec is None:
        return None
    model = _attribute(spec.record, "Record")
    return model if isinstance(model, type) and issubclass(model, StageRecord) else None


def parse_record(name: str, data: dict[str, Any]) -> StageRecord | None:
    """`result.json`'s `data` of stage `name`, read into its typed record (validation errors
    propagate: a record that does not read is never guessed at). None when the stage declares
    no record or the data is empty (a stage that stopped before measuring)."""
    model = record_model(name)
    if model is None or not data:
        return None
    return model.model_validate(data)


def rebuild_of(name: str) -> Callable[..., Any] | None:
    """The function deriving a declared stage's record from what its attempt kept, or None."""
    spec = SPECS.get(name)
    fn = _attribute(spec.rebuild, "rebuild") if spec and spec.rebuild else None
    return fn if callable(fn) else None


def section_module(name: str) -> ModuleType | None:
    """The module that presents stage `name` in the decision document, if its package has one."""
    spec = SPECS.get(name)
    return _optional_module(spec.section) if spec else None


# The stages of this build, in the order of the default `stages.run`: vram last, since it
# judges the sampler's series of every stage before it.
register_stage(StageSpec("identity", rebuild=None))
register_stage(
    StageSpec(
        "preflight",
        gates="probe",
        check_modules=("qualify.preflight.checks",),
        settings="qualify.preflight.settings:PreflightSettings",
    )
)
register_stage(
    StageSpec(
        "quality",
        gates="probe",
        check_modules=("qualify.quality.checks",),
        settings="qualify.quality.settings:QualitySettings",
    )
)
register_stage(StageSpec("context", settings="qualify.context.settings:ContextSettings"))
register_stage(StageSpec("ab", settings="qualify.ab.settings:ABSettings"))
register_stage(
    StageSpec("capacity", default=False, settings="qualify.capacity.settings:CapacitySettings")
)
register_stage(
    StageSpec(
        "vram",
        last=True,
        settings="qualify.vram.settings:VramSettings",
        sampler="qualify.vram:start_sampler",
    )
)
