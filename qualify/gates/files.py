"""Gate files: the YAML model, loading with one line per problem, and its JSON Schema."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

import yaml
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from pydantic import Field, ValidationError, field_validator

from qualify import assets
from qualify.errors import format_validation_error
from qualify.gates.registry import CHECKS, load_checks
from qualify.records import Severity, StrictModel
from qualify.registry import stage_names

# A params field naming a JSON file under the gates directory (`tools: JsonFile`): loading the
# gate checks that it is there and holds valid JSON Schemas.
JSON_FILE = "json-file"
JsonFile = Annotated[str, JSON_FILE]


class Params(StrictModel):
    """Base of every check's params; `files` names the schema files the params point at."""

    def files(self) -> list[str]:
        named = type(self).model_fields.items()
        return [getattr(self, k) for k, f in named if JSON_FILE in f.metadata]


class GateFile(StrictModel):
    """One gate, declared: which check runs, how often, how much it weighs, with what params."""

    schema_version: Literal[1] = Field(description="bump on a breaking change of this model")
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$", description="the gate's name in decisions")
    check: str = Field(description="a registered check (qualify.gates)")
    stage: str  # a stage declared in qualify.registry (the schema lists them)
    severity: Severity = "required"
    critical: bool = Field(
        default=False, description="a failure vetoes the decision on its own, whatever else passed"
    )
    attempts: int = Field(default=1, ge=1, le=20, description="every attempt must pass")
    description: str = ""
    params: dict[str, object] = Field(default_factory=dict)

    @field_validator("stage")
    @classmethod
    def _registered(cls, v: str) -> str:
        if v not in stage_names():
            raise ValueError(f"expected one of {list(stage_names())} (got {v!r})")
        return v


@dataclass(frozen=True)
class LoadedGate:
    path: Path
    sha256: str
    gate: GateFile
    params: Params


def _file_problems(rel: str, gates_dir: Path) -> list[str]:
    path = gates_dir / rel
    try:
        doc = json.loads(path.read_text())
    except OSError:
        return [f"expected a file under {gates_dir} (got {rel!r}, which does not exist)"]
    except ValueError as exc:
        return [f"expected JSON in {rel} (got {exc})"]
    schemas = [doc] if isinstance(doc, dict) else []
    if isinstance(doc, list):
        schemas = [(t.get("function", t)).get("parameters", {}) for t in doc if isinstance(t, dict)]
    for schema in schemas:
        try:
            Draft202012Validator.check_schema(schema)
        except SchemaError as exc:
            return [f"expected a valid JSON Schema in {rel} (got {exc.message})"]
    return []


Marks = dict[tuple[str | int, ...], str]


def _where(mark: yaml.Mark) -> str:
    return f" (line {mark.line + 1}, column {mark.column + 1})"


def _marks(node: yaml.Node | None) -> Marks:
    """Where each field of a YAML document starts, ` (line L, column C)` (1-based; a mapping's
    field at its key) by its path, so an error names the line a person must fix."""
    out: Marks = {}

    def walk(n: yaml.Node, loc: tuple[str | int, ...]) -> None:
        out[loc] = _where(n.start_mark)
        if isinstance(n, yaml.MappingNode):
            for key, value in n.value:
                here = (*loc, str(key.value))
                walk(value, here)
                out[here] = _where(key.start_mark)
        elif isinstance(n, yaml.SequenceNode):
            for i, item in enumerate(n.value):
                walk(item, (*loc, i))

    if node is not None:
        walk(node, ())
    return out


def _at(marks: Marks, loc: tuple[str | int, ...]) -> str:
    """Where the field at `loc` is, else the nearest field above it."""
    return next((marks[loc[:n]] for n in range(len(loc), -1, -1) if loc[:n] in marks), "")


def _errors(exc: ValidationError, marks: Marks, prefix: tuple[str, ...] = ()) -> list[str]:
    """One line per problem (`format_validation_error`), each with where it is in the file."""
    lines = format_validation_error(exc)
    locs = [tuple(e["loc"]) for e in exc.errors()]
    return [f"{line}{_at(marks, (*prefix, *loc))}" for line, loc in zip(lines, locs, strict=True)]


def _folder_stage(path: Path, gates_dir: Path) -> str | None:
    """The stage a gate file's folder names (`gates/<stage>/...`), or None for a file outside
    a stage's folder (a candidate's own folder of preflight gates may be flat)."""
    try:
        parts = path.relative_to(gates_dir).parts
    except ValueError:
        return None
    return parts[0] if len(parts) > 1 and parts[0] in stage_names() else None


@dataclass(frozen=True)
class _Parsed:
    loaded: LoadedGate | None
    problems: list[str]
    owner: str | None  # the stage the file belongs to; None: it cannot tell (flat, unreadable)


# Each file parsed once per version (`validate` loads the folder for each candidate, and each
# stage loads its own files); a file that changes (mtime or size) is read again.
_PARSED: dict[tuple[Path, Path, int, int], _Parsed] = {}


def _parse(path: Path, gates_dir: Path) -> _Parsed:
    """A gate file read and checked, and the stage it belongs to: its folder's, else the
    registered stage it declares."""
    data, folder = path.read_bytes(), _folder_stage(path, gates_dir)
    try:
        node = yaml.compose(data, Loader=yaml.SafeLoader)
        raw = yaml.safe_load(data)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        what = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        where = _where(mark) if mark is not None else ""
        return _Parsed(None, [f"{path}: expected YAML (got {what}){where}"], folder)
    said = raw.get("stage") if isinstance(raw, dict) else None
    owner = folder or (said if isinstance(said, str) and said in stage_names() else None)
    return _Parsed(*_load(path, gates_dir, data, raw, _marks(node), folder), owner)


def _load(
    path: Path, gates_dir: Path, data: bytes, raw: object, marks: Marks, folder: str | None
) -> tuple[LoadedGate | None, list[str]]:
    try:
        gate = GateFile.model_validate(raw)
    except ValidationError as exc:
        return None, [f"{path}: {line}" for line in _errors(exc, marks)]
    if folder is not None and gate.stage != folder:
        return None, [
            f"{path}: stage: expected {folder!r}, the stage of the folder it sits in "
            f"(got {gate.stage!r}){_at(marks, ('stage',))}"
        ]
    spec = CHECKS.get(gate.check)
    if spec is None:
        return None, [
            f"{path}: check: expected one of {sorted(CHECKS)} (got {gate.check!r})"
            f"{_at(marks, ('check',))}"
        ]
    if spec.stage != gate.stage:
        return None, [
            f"{path}: check: expected a check of stage {gate.stage!r} "
            f"(got {gate.check!r}, a check of stage {spec.stage!r}){_at(marks, ('check',))}"
        ]
    try:
        params = spec.params.model_validate(gate.params)
    except ValidationError as exc:
        bad = _errors(exc, marks, ("params",))  # `.field: ...`, or `: ...` for the whole table
        return None, [f"{path}: params" + f".{x}".removeprefix(".(top level)") for x in bad]
    if not isinstance(params, Params):
        raise TypeError(f"check {spec.name}: params model must derive from Params")
    problems: list[str] = []
    for rel in params.files():
        problems.extend(f"{path}: params: {p}" for p in _file_problems(rel, gates_dir))
    digest = hashlib.sha256(data).hexdigest()
    return (None if problems else LoadedGate(path, digest, gate, params)), problems


# The project's `gates/` folder: the checkout's, or the copy the installed package ships.
default_gates_dir = assets.gates_dir


def declared(stage: str) -> dict[str, str]:
    """The gate files the project declares for a stage, `{id: sha256}`: what a run must have
    run, unchanged, for the decision to count the stage (a candidate that picks a subset or its
    own folder of gate files is missing the rest)."""
    gates, _ = load_gates(default_gates_dir(), stage)
    return {g.gate.id: g.sha256 for g in gates}


def pick(
    gates: list[LoadedGate], wanted: list[str], field: str, where: object, noun: str = "gate"
) -> tuple[list[LoadedGate], list[str]]:
    """The gates a candidate names in `field` (all when it names none), and a line for each name
    that is not a gate id in `where`. (The decision still counts every declared gate: naming a
    subset makes a quicker run, never a promote.)"""
    known = {g.gate.id: g for g in gates}
    problems = [
        f"{field}[{i}]: expected a {noun} id from {where} {sorted(known)} (got {gid!r})"
        for i, gid in enumerate(wanted)
        if gid not in known
    ]
    return ([known[g] for g in wanted if g in known] if wanted else gates), problems


def load_all_gates(gates_dir: Path) -> tuple[list[LoadedGate], list[str]]:
    """Every gate file of every registered stage under `gates_dir`, with every problem found
    (each once)."""
    out: list[LoadedGate] = []
    problems: list[str] = []
    for stage in stage_names():
        gates, bad = load_gates(gates_dir, stage)
        out.extend(gates)
        problems.extend(p for p in bad if p not in problems)
    return out, problems


def load_gates(gates_dir: Path, stage: str = "preflight") -> tuple[list[LoadedGate], list[str]]:
    """Every gate file of a stage under `gates_dir`, sorted by id, with every problem found in
    the stage's files: those in `gates_dir/<stage>/`, and, outside any stage's folder, those
    that declare the stage (or whose stage cannot be read). A file in one stage's folder that
    declares another stage is a problem of the folder's stage, and loads for neither."""
    load_checks()
    if not gates_dir.is_dir():
        return [], [f"{gates_dir}: expected a directory of gate files (it does not exist)"]
    gates: list[LoadedGate] = []
    problems: list[str] = []
    seen: dict[str, Path] = {}
    for path in sorted(gates_dir.rglob("*.yaml")):
        st = path.stat()
        key = (path.resolve(), gates_dir.resolve(), st.st_mtime_ns, st.st_size)
        parsed = _PARSED[key] = _PARSED.get(key) or _parse(path, gates_dir)
        if parsed.owner not in (None, stage):
            continue
        problems.extend(parsed.problems)
        loaded = parsed.loaded
        if loaded is None or loaded.gate.stage != stage:
            continue
        if loaded.gate.id in seen:
            problems.append(
                f"{path}: id: expected a unique id (got {loaded.gate.id!r}, "
                f"also in {seen[loaded.gate.id]})"
            )
            continue
        seen[loaded.gate.id] = path
        gates.append(loaded)
    return sorted(gates, key=lambda g: g.gate.id), problems


def gate_file_schema() -> dict[str, object]:
    """The JSON Schema of a gate file, with each check's params, for editors and tests."""
    load_checks()
    schema = GateFile.model_json_schema()
    schema["$id"] = "https://qualify.local/schemas/gate-file-v1.json"
    defs: dict[str, object] = schema.setdefault("$defs", {})
    rules = []
    for name in sorted(CHECKS):
        ps = CHECKS[name].params.model_json_schema(ref_template="#/$defs/{model}")
        defs.update(ps.pop("$defs", {}))
        defs[f"params-{name}"] = ps
        rules.append(
            {
                "if": {"properties": {"check": {"const": name}}, "required": ["check"]},
                "then": {"properties": {"params": {"$ref": f"#/$defs/params-{name}"}}},
            }
        )
    schema["properties"]["check"]["enum"] = sorted(CHECKS)
    schema["properties"]["stage"]["enum"] = list(stage_names())
    schema["allOf"] = rules
    return schema
