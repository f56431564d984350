"""The candidate file: a pydantic model of `candidate.toml`, and the control derived from it.

Its `[stages]` table is assembled from the registry (`qualify.assembled`): this module imports
no stage."""

from __future__ import annotations

import hashlib
import re
import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from qualify.assembled import Stages as Stages
from qualify.candidate_settings import AliasTarget, Policy, Signing
from qualify.errors import BadInput
from qualify.errors import format_validation_error as format_validation_error
from qualify.records import StrictModel

Engine = Literal["vllm", "sglang", "llama.cpp"]
Scalar = str | int | float | bool
JSONValue = Scalar | list[Scalar] | dict[str, Scalar | list[Scalar] | dict[str, Scalar]]
PositiveFloat = Annotated[float, Field(gt=0)]
PositiveInt = Annotated[int, Field(gt=0)]

# Field names that, when they appear in a candidate, can only mean a secret was written down.
_SECRET_KEYS = {"api_key", "apikey", "token", "authorization", "password", "secret"}


class Parallelism(StrictModel):
    tensor: PositiveInt = 1
    pipeline: PositiveInt = 1
    data: PositiveInt = 1
    decode_context: PositiveInt = 1
    expert: bool = False


class Speculation(StrictModel):
    method: str = Field(description="e.g. none, ngram-mod, dspark, mtp, eagle3")
    draft_tokens: Annotated[int, Field(ge=0)] = 0
    draft_model: str | None = None


class Identity(StrictModel):
    """Pins: what the recipe is. The identity stage holds the server to them."""

    model: str = Field(description="served model id, as /v1/models reports it")
    revision: str
    engine: Engine
    engine_build: str
    image_digest: str | None = None
    quantization: str
    kv_dtype: str
    parallelism: Parallelism = Field(default_factory=Parallelism)
    context_length: PositiveInt = Field(
        description="the context one request may use (llama-server: -c / -np, per slot)"
    )
    max_num_seqs: PositiveInt = 1
    speculation: Speculation = Field(default_factory=lambda: Speculation(method="none"))

    @field_validator("image_digest")
    @classmethod
    def _digest_form(cls, v: str | None) -> str | None:
        if v is not None and "@sha256:" not in v and not v.startswith("sha256:"):
            raise ValueError("expected an image pinned by digest (name@sha256:<hex>)")
        return v


class LocalLaunch(StrictModel):
    """Start the server as a local process."""

    command: list[str] = Field(min_length=1)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None


_NAMED_VOLUME = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"


class ContainerLaunch(StrictModel):
    """Start the server as a container pinned by digest.

    The defaults start vLLM and SGLang images as their documentation does: the host's IPC
    namespace (`--ipc host`: tensor-parallel workers share memory through /dev/shm, which is
    64 MiB in a container of its own), the image's own entrypoint, every GPU the runtime hands
    over only when `gpus` says so."""

    runtime: Literal["docker", "podman"] = "docker"
    image: str
    entrypoint: str | None = Field(
        default=None,
        description=(
            "replaces the image's entrypoint (--entrypoint); empty clears it; unset keeps the "
            "image's own: `args` then follow it (the vllm/vllm-openai image's entrypoint is "
            "`vllm serve`, so its args begin with the model)"
        ),
    )
    args: list[str] = Field(default_factory=list)
    volumes: list[str] = Field(
        default_factory=list,
        description=(
            '"SOURCE:/container/path[:opts]": SOURCE an absolute host path, a path relative to '
            "the candidate file (./ or ../), or a named volume (a bare name)"
        ),
    )
    env: dict[str, str] = Field(default_factory=dict)
    gpus: str | None = Field(
        default=None, pattern=r"^(all|\d+(,\d+)*)$", description='"all" or GPU indexes "0,1"'
    )
    ipc: str | None = Field(
        default="host",
        description='IPC namespace (--ipc): "host" (default), "private", "shareable"; none: the '
        "runtime's default",
    )
    shm_size: str | None = Field(
        default=None,
        pattern=r"^\d+[bkmgBKMG]?$",
        description='size of /dev/shm (--shm-size, e.g. "16g") when ipc is not "host"',
    )
    network: str = Field(default="host", description="the container's network (--network)")
    ports: list[str] = Field(
        default_factory=list, description='published ports ("HOST:CONTAINER"), off host network'
    )
    extra_run_args: list[str] = Field(default_factory=list)

    @field_validator("image")
    @classmethod
    def _pinned(cls, v: str) -> str:
        if "@sha256:" not in v:
            raise ValueError("expected an image pinned by digest (name@sha256:<hex>)")
        return v

    @field_validator("volumes")
    @classmethod
    def _volumes(cls, v: list[str]) -> list[str]:
        for i, spec in enumerate(v):
            parts = spec.split(":")
            if len(parts) not in (2, 3) or not parts[0] or not parts[1].startswith(("/", "{")):
                raise ValueError(f"[{i}] expected SOURCE:/container/path[:opts] (got {spec!r})")
            src = parts[0]
            if not (src.startswith(("/", "./", "../", "{", "~")) or re.match(_NAMED_VOLUME, src)):
                raise ValueError(
                    f"[{i}] SOURCE must be an absolute path, ./ or ../ relative to the "
                    f"candidate file, or a volume name (got {src!r})"
                )
        return v

    @model_validator(mode="after")
    def _shm(self) -> ContainerLaunch:
        if self.shm_size is not None and self.ipc == "host":
            raise ValueError(
                'shm_size applies to a container\'s own IPC namespace: with ipc = "host" the '
                'host\'s /dev/shm is used (podman refuses both); set ipc = "private" or drop '
                "shm_size"
            )
        return self


class Server(StrictModel):
    """How to reach the server, and how to launch it (or neither, to attach)."""

    base_url: str = Field(pattern=r"^https?://")
    api_key_env: str | None = Field(
        default=None, description="name of the environment variable holding the API key"
    )
    health_path: str = "/health"
    startup_timeout_s: PositiveFloat = 300.0
    request_timeout_s: PositiveFloat = 120.0
    stop_grace_s: PositiveFloat = 10.0
    launch: LocalLaunch | None = None
    container: ContainerLaunch | None = None
    attach: bool = Field(default=False, description="attach to a server that is already running")

    @model_validator(mode="after")
    def _one_way_to_start(self) -> Server:
        ways = [n for n, on in (("launch", self.launch), ("container", self.container)) if on]
        if self.attach:
            ways.append("attach")
        if len(ways) != 1:
            found = " and ".join(f"server.{w}" for w in ways) or "none of them"
            raise ValueError(
                "expected exactly one of server.launch, server.container or "
                f"server.attach = true (found {found})"
            )
        return self


class ReasoningLevel(StrictModel):
    """Request fields merged into every request at this level."""

    reasoning_effort: str | None = None
    chat_template_kwargs: dict[str, Scalar] | None = None
    thinking_token_budget: Annotated[int, Field(ge=0)] | None = None
    thinking_budget_tokens: Annotated[int, Field(ge=0)] | None = None
    include_reasoning: bool | None = None
    reasoning_format: str | None = None
    extra_body: dict[str, JSONValue] = Field(default_factory=dict)

    def request_fields(self) -> dict[str, object]:
        fields = self.model_dump(exclude_none=True, exclude={"extra_body"})
        fields.update(self.extra_body)
        return fields


class Candidate(StrictModel):
    schema_version: Literal[1] = 1
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    description: str = ""
    identity: Identity
    server: Server
    reasoning: dict[str, ReasoningLevel] = Field(
        default_factory=lambda: {"default": ReasoningLevel()}
    )
    stages: Stages = Field(default_factory=Stages)
    policy: Policy = Field(default_factory=Policy)
    alias: AliasTarget | None = None
    signing: Signing = Field(default_factory=Signing)
    variable: str | None = Field(default=None, description="what a control changes")


class ControlFile(StrictModel):
    """A control: the candidate it extends, and the named fields it changes."""

    schema_version: Literal[1] = 1
    extends: str
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    variable: str
    overrides: dict[str, object] = Field(min_length=1)


class LoadedCandidate(StrictModel):
    """A validated candidate with where it came from and its digest."""

    path: str
    sha256: str
    candidate: Candidate

    @property
    def directory(self) -> Path:
        return Path(self.path).parent


def _read_toml(path: Path) -> tuple[bytes, dict[str, Any]]:  # raw TOML
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise BadInput(
            f"{path} cannot be read", [f"{exc.strerror or exc} (expected a readable TOML file)"]
        ) from None
    try:
        return data, tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise BadInput(f"{path} is not UTF-8 text", [str(exc)]) from None
    except tomllib.TOMLDecodeError as exc:
        raise BadInput(f"{path} is not valid TOML", [str(exc)]) from None


def _find_secrets(raw: object, path: str = "") -> list[str]:
    found: list[str] = []
    if isinstance(raw, dict):
        for key, value in raw.items():
            here = f"{path}.{key}" if path else str(key)
            if str(key).lower() in _SECRET_KEYS and isinstance(value, str):
                found.append(
                    f"{here}: a secret must not be written in the file "
                    "(expected server.api_key_env naming an environment variable)"
                )
            found.extend(_find_secrets(value, here))
    return found


def load_candidate(path: str | Path, base: Path | None = None) -> LoadedCandidate:
    """Load and validate a candidate file, or a control file that extends one (its `a.b.c =
    value` overrides applied to the raw table of the candidate it extends; `base`, when given,
    is read in place of the file `extends` names, and `path` must be a control)."""
    p = Path(path)
    data, raw = _read_toml(p)
    digest = hashlib.sha256(data).hexdigest()
    if "extends" in raw or base is not None:
        try:
            control = ControlFile.model_validate(raw)
        except ValidationError as exc:
            raise BadInput(f"{p} is not a valid control", format_validation_error(exc)) from None
        base_path = base or (p.parent / control.extends).resolve()
        if not base_path.is_file():
            raise BadInput(
                f"{p} is not a valid control",
                [
                    f"extends: expected a readable candidate file (got {control.extends!r}, "
                    f"which is not a file at {base_path})"
                ],
            )
        _, raw = _read_toml(base_path)
        wrong = []
        for dotted, value in control.overrides.items():
            *parents, leaf = dotted.split(".")
            node: object = raw  # a raw TOML table, or a leaf where the path runs past one
            for i, part in enumerate(parents):
                if not isinstance(node, dict):
                    wrong.append(f"overrides.{dotted}: {'.'.join(parents[: i + 1])} is not a table")
                    break
                node = node.setdefault(part, {})
            else:
                if isinstance(node, dict):
                    node[leaf] = value
                else:
                    wrong.append(f"overrides.{dotted}: parent is not a table")
        if wrong:
            raise BadInput(f"{p} is not a valid control", wrong)
        raw["name"] = control.name
        raw["variable"] = control.variable
        raw.get("stages", {}).get("ab", {}).pop("control", None)
        raw.pop("alias", None)
    problems = _find_secrets(raw)
    secret_paths = {line.split(":", 1)[0] for line in problems}
    try:
        cand = Candidate.model_validate(raw)
    except ValidationError as exc:
        problems.extend(format_validation_error(exc, skip=secret_paths))
        cand = None
    if problems or cand is None:
        raise BadInput(f"{p} is not a valid candidate", problems)
    return LoadedCandidate(path=str(p), sha256=digest, candidate=cand)


def resolve_path(loaded: LoadedCandidate, rel: str) -> Path:
    """A path named in a candidate is relative to the candidate file's directory."""
    q = Path(rel).expanduser()
    return q if q.is_absolute() else (loaded.directory / q).resolve()
