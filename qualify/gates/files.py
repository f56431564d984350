"""Gate files: the YAML model, loading with one line per problem, and its JSON Schema."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from pydantic import Field, ValidationError

from qualify.candidate import format_validation_error
from qualify.gates.registry import CHECKS, load_checks
from qualify.records import Severity, StrictModel

GATE_FILE_VERSION = 1


class Params(StrictModel):
    """Base of every check's params; `files` names the schema files the params point at."""

    def files(self) -> list[str]:
        return []


class GateFile(StrictModel):
    """One gate, declared: which check runs, how often, how much it weighs, with what params."""

    schema_version: Literal[1] = Field(description="bump on a breaking change of this model")
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$", description="the gate's name in decisions")
    check: str = Field(description="a registered check (qualify.gates)")
    stage: Literal["identity", "preflight", "quality", "context", "ab", "vram", "capacity"]
    severity: Severity = "required"
    critical: bool = Field(
        default=False, description="a failure vetoes the decision on its own, whatever else passed"
    )
    attempts: int = Field(default=1, ge=1, le=20, description="every attempt must pass")
    description: str = ""
    params: dict[str, Any] = Field(default_factory=dict)


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


def _sub(line: str) -> str:
    """A params error line under `params`: `.field: ...`, or `: ...` for the whole table."""
    top = "(top level)"
    return line[len(top) :] if line.startswith(top) else f".{line}"


def _parse(path: Path, gates_dir: Path) -> tuple[LoadedGate | None, list[str]]:
    data = path.read_bytes()
    try:
        raw = yaml.safe_load(data)
    except yaml.YAMLError as exc:
        return None, [f"{path}: expected YAML (got {str(exc).splitlines()[0]})"]
    try:
        gate = GateFile.model_validate(raw)
    except ValidationError as exc:
        return None, [f"{path}: {line}" for line in format_validation_error(exc)]
    spec = CHECKS.get(gate.check)
    if spec is None:
        return None, [f"{path}: check: expected one of {sorted(CHECKS)} (got {gate.check!r})"]
    if spec.stage != gate.stage:
        return None, [
            f"{path}: check: expected a check of stage {gate.stage!r} "
            f"(got {gate.check!r}, a check of stage {spec.stage!r})"
        ]
    try:
        params = spec.params.model_validate(gate.params)
    except ValidationError as exc:
        lines = format_validation_error(exc)
        return None, [f"{path}: params{_sub(line)}" for line in lines]
    if not isinstance(params, Params):
        raise TypeError(f"check {spec.name}: params model must derive from Params")
    problems: list[str] = []
    for rel in params.files():
        problems.extend(f"{path}: params: {p}" for p in _file_problems(rel, gates_dir))
    digest = hashlib.sha256(data).hexdigest()
    return (None if problems else LoadedGate(path, digest, gate, params)), problems


_PARSED: dict[tuple[Path, Path, int, int], tuple[LoadedGate | None, list[str]]] = {}


def _parse_once(path: Path, gates_dir: Path) -> tuple[LoadedGate | None, list[str]]:
    """`_parse`, once per file version: every stage's loader walks the same folder, and
    `validate` loads it for each candidate. A file that changes (mtime or size) is read again."""
    st = path.stat()
    key = (path.resolve(), gates_dir.resolve(), st.st_mtime_ns, st.st_size)
    if key not in _PARSED:
        _PARSED[key] = _parse(path, gates_dir)
    loaded, problems = _PARSED[key]
    return loaded, list(problems)


def default_gates_dir() -> Path:
    """The project's `gates/` folder."""
    import qualify

    return Path(qualify.__file__).resolve().parent.parent / "gates"


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
    """Every gate file of every stage under `gates_dir`, with every problem found."""
    out: list[LoadedGate] = []
    problems: list[str] = []
    for stage in ("identity", "preflight", "quality", "context", "ab", "vram", "capacity"):
        gates, bad = load_gates(gates_dir, stage)
        out.extend(gates)
        problems.extend(p for p in bad if p not in problems)
    return out, problems


def load_gates(gates_dir: Path, stage: str = "preflight") -> tuple[list[LoadedGate], list[str]]:
    """Every gate file of a stage under `gates_dir`, sorted by id, with every problem found."""
    load_checks()
    if not gates_dir.is_dir():
        return [], [f"{gates_dir}: expected a directory of gate files (it does not exist)"]
    gates: list[LoadedGate] = []
    problems: list[str] = []
    seen: dict[str, Path] = {}
    for path in sorted(gates_dir.rglob("*.yaml")):
        loaded, bad = _parse_once(path, gates_dir)
        problems.extend(bad)
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


def gate_file_schema() -> dict[str, Any]:
    """The JSON Schema of a gate file, with each check's params, for editors and tests."""
    load_checks()
    schema = GateFile.model_json_schema()
    schema["$id"] = "https://qualify.local/schemas/gate-file-v1.json"
    defs: dict[str, Any] = schema.setdefault("$defs", {})
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
    schema["allOf"] = rules
    return schema
