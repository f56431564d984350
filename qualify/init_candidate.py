"""`qualify init --attach URL`: a commented candidate for a server the user already runs, read
as the identity stage reads it (`engine_reports`, the adapter's `observe`) and asking nothing
more. Each pin reported is written with where it was read, in a spelling the adapter judges the
same as the report; each pin not reported is marked "set it by hand" with the adapter's reason.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx
import jinja2
from pydantic import ValidationError

from qualify.candidate import Identity, Parallelism
from qualify.errors import BadInput
from qualify.httpclient.client import Client
from qualify.identity.stage import engine_reports
from qualify.registry import default_run
from qualify.serving.engine import ADAPTERS, EngineAdapter
from qualify.serving.engine.llamacpp import llamacpp_quant_names
from qualify.serving.engine.vllm import SERVER_INFO, server_config
from qualify.serving.identity import PINS, Seen, models_of

# What a required pin the server does not report is written as, so the file validates; the
# identity stage finds it unverifiable (inconclusive), never passed.
PLACEHOLDER: dict[str, str | int] = {
    "revision": "unknown",
    "engine_build": "unknown",
    "quantization": "unknown",
    "kv_dtype": "unknown",
    "context_length": 4096,
}
# A valid set of the required pins, for checking one pin at a time (`_fits`).
_SOME_PINS = {**PLACEHOLDER, "model": "m", "engine": "vllm"}
# The engines as their own projects write them.
SPELLED = {"vllm": "vLLM", "sglang": "SGLang", "llama.cpp": "llama.cpp"}
# What an optional pin's commented-out line shows: its default (unset, the pin is that).
EXAMPLE: dict[str, object] = {
    "image_digest": "registry.example/name@sha256:<digest>",
    "parallelism": {"tensor": 1},
    "max_num_seqs": 1,
    "speculation": {"method": "none", "draft_tokens": 0},
}


@dataclass(frozen=True)
class Server:
    """What one server said about itself, read through its engine's adapter."""

    url: str
    engine: EngineAdapter
    model: str
    bodies: dict[str, object]
    seen: dict[str, Seen]
    why: dict[str, str]


@dataclass(frozen=True)
class Pin:
    """One pin as it will be written: its value (None: the line is commented out), where it was
    read (None: not read), and what the reader must know (why unread, or what cannot be told)."""

    name: str
    value: object
    source: str | None
    note: str = ""


async def read_server(
    url: str, api_key: str | None = None, transport: httpx.AsyncBaseTransport | None = None
) -> Server:
    """`GET /v1/models` names the engine (`owned_by`); its adapter then reads the server as the
    identity stage does (its info paths, and a 1-token completion where that tells something)."""
    async with Client(url, api_key, timeout_s=30.0, transport=transport) as client:
        models = await client.get("/v1/models")
        if models.error is not None:
            raise BadInput(f"{url}: not reachable ({models.error})")
        if not models.ok:
            hint = " (a key it asks for: --api-key-env VAR)" if models.status in (401, 403) else ""
            raise BadInput(f"{url}: GET /v1/models answered HTTP {models.status}{hint}")
        listed = [m for m in models_of(models.body) if isinstance(m, dict) and m.get("id")]
        if not listed:
            raise BadInput(f"{url}: GET /v1/models lists no model")
        owner = listed[0].get("owned_by")
        engine = next((a for a in ADAPTERS.values() if a.owned_by == owner), None)
        if engine is None:
            known = ", ".join(f"{a.owned_by!r} ({a.name})" for a in ADAPTERS.values())
            raise BadInput(f"{url}: GET /v1/models owned_by {owner!r} is none of {known}")
        model = str(listed[0]["id"])
        bodies = {"/v1/models": models.body}
        bodies.update(await engine_reports(client, engine, model, lambda _label, _ex: None))
    seen, why = engine.observe(bodies, None)
    return Server(url.rstrip("/"), engine, model, bodies, seen, why)


def _spellings(pin: str, value: Any) -> list[object]:  # value: the server's raw JSON report
    """The ways a reported value may be written as the pin, most literal first."""
    if value is None and pin != "quantization":
        return []
    if pin == "model":
        return [str(v) for v in (value if isinstance(value, list) else [value])]
    if pin == "quantization":
        text = "none" if value is None else str(value)
        return ["none", text, *llamacpp_quant_names(text)]
    if pin in ("context_length", "max_num_seqs"):
        return [int(value)] if str(value).isdigit() and int(value) > 0 else []
    if pin == "parallelism":
        fields = {k: v for k, v in dict(value).items() if k in Parallelism.model_fields}
        kept = {k: v for k, v in fields.items() if k == "tensor" or v != getattr(Parallelism(), k)}
        return [kept] if "tensor" in kept else []
    if pin == "speculation":
        return [_speculation(dict(value))]
    return [str(value)]


def _speculation(seen: Mapping[str, object]) -> dict[str, object]:
    method = str(seen.get("method") or "none")
    if method == "none":
        return {"method": "none", "draft_tokens": 0}
    out: dict[str, object] = {"method": method}
    if isinstance(seen.get("draft_tokens"), int):
        out["draft_tokens"] = seen["draft_tokens"]
    model = seen.get("draft_model")
    if model and model != method:
        out["draft_model"] = str(model)
    return out


def _read_pin(engine: EngineAdapter, pin: str, seen: Seen) -> Pin:
    """The first spelling the adapter judges the same as the report (or cannot tell apart)."""
    if pin == "engine":
        return Pin(pin, engine.name, f"{seen.source} {seen.value!r}")
    undecided: Pin | None = None
    for value in filter(lambda v: _fits(pin, v), _spellings(pin, seen.value)):
        same, note = engine.same(pin, value, seen.value)
        if same:
            return Pin(pin, value, seen.source)
        if same is None and undecided is None:
            undecided = Pin(
                pin, value, seen.source, f"identity cannot verify it as written ({note})"
            )
    return undecided or _unread(pin, f"{seen.source} reports {seen.value!r}, which names no {pin}")


def _fits(pin: str, value: object) -> bool:
    """Whether the candidate schema takes `value` as the pin (a server may report nonsense)."""
    try:
        Identity.model_validate({**_SOME_PINS, pin: value})
    except ValidationError:
        return False
    return True


def _unread(pin: str, why: str) -> Pin:
    required = Identity.model_fields[pin].is_required()
    return Pin(pin, PLACEHOLDER.get(pin) if required else None, None, why)


def pins_of(server: Server) -> list[Pin]:
    """Every pin of the candidate, in the schema's order: read, or marked unread with why."""
    return [
        _read_pin(server.engine, pin, server.seen[pin])
        if pin in server.seen
        else _unread(pin, server.why.get(pin, "nothing reports it"))
        for pin in PINS
    ]


def reasoning(server: Server) -> tuple[str, str] | None:
    """How the server says it splits reasoning out, and where it said so: the reasoning parser
    of vLLM's resolved config (dev mode) or SGLang's server arguments, or a thinking switch in
    the chat template llama-server reports; None when it says nothing of it."""
    props = server.bodies.get("/props")
    if isinstance(props, dict) and "enable_thinking" in str(props.get("chat_template") or ""):
        return (
            "a thinking switch (enable_thinking) in its chat template",
            "GET /props chat_template",
        )
    info = server.bodies.get(SERVER_INFO) or server.bodies.get("/server_info")
    if not isinstance(info, dict):
        return None
    if isinstance(info.get("reasoning_parser"), str) and info["reasoning_parser"]:
        return f"the {info['reasoning_parser']!r} parser", "GET /server_info reasoning_parser"
    conf = server_config(info).get("structured_outputs_config") or {}
    if isinstance(conf, dict) and conf.get("reasoning_parser"):
        src = "GET /server_info vllm_config structured_outputs_config.reasoning_parser"
        return f"the {conf['reasoning_parser']!r} parser", src
    m = re.search(r"reasoning_parser='([^']+)'", str(info.get("vllm_config") or ""))
    return (f"the {m.group(1)!r} parser", "GET /server_info vllm_config (text)") if m else None


def comment(text: str) -> str:
    """`text` as TOML comment lines of at most 99 characters, one paragraph per line of it."""
    lines = [
        line
        for par in text.split("\n")
        for line in textwrap.wrap(par, 97, break_long_words=False, break_on_hyphens=False) or [""]
    ]
    return "\n".join(f"# {line}".rstrip() for line in lines)


def toml_value(value: object) -> str:
    """A TOML literal of a string, integer, boolean, list or (inline) table."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        escaped = value.replace("\\", "\\\\").replace('"', '\\"')
        return '"' + re.sub(r"[\x00-\x1f\x7f]", lambda m: f"\\u{ord(m.group()):04x}", escaped) + '"'
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        inner = ", ".join(f"{_key(k)} = {toml_value(v)}" for k, v in value.items())
        return "{ " + inner + " }" if inner else "{}"
    raise TypeError(f"no TOML literal for {type(value).__name__}")


def _key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else toml_value(key)


def pin_text(pin: Pin, engine: str) -> str:
    """The lines of one pin: where it was read, or why it was not; then the pin itself."""
    if pin.source is not None:
        lines = [comment(f"read from {pin.source}")]
        if pin.note:
            lines.append(comment(f"{pin.note}: set it by hand"))
        return "\n".join([*lines, f"{pin.name} = {toml_value(pin.value)}"])
    said = f"not reported by {SPELLED.get(engine, engine)}: set it by hand ({pin.note})"
    if pin.value is not None:
        return (
            f"{comment(said + '; until then a placeholder')}\n{pin.name} = {toml_value(pin.value)}"
        )
    unset = "" if pin.name == "image_digest" else "; unset, the pin is the default shown"
    return f"{comment(said + unset)}\n# {pin.name} = {toml_value(EXAMPLE[pin.name])}"


def slug(model: str) -> str:
    """A candidate name from a model id (`org/Model-7B` gives `model-7b`)."""
    base = model.rstrip("/").rsplit("/", 1)[-1]
    return re.sub(r"[^a-z0-9._-]+", "-", base.lower()).strip("-._") or "candidate"


_ENV = jinja2.Environment(
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
    autoescape=False,
)
_ENV.filters["toml"] = toml_value
_ENV.filters["comment"] = comment

CANDIDATE = _ENV.from_string(
    """\
{{ header|comment }}
schema_version = 1
name = {{ name|toml }}
description = {{ description|toml }}

[identity]
{% for pin in pins %}
{{ pin }}
{% endfor %}

[server]
base_url = {{ url|toml }}
{% if api_key_env %}
api_key_env = {{ api_key_env|toml }}
{% else %}
# The environment variable holding the API key, if the server asks for one (never the key).
# api_key_env = "OPENAI_API_KEY"
{% endif %}
health_path = "/health"
request_timeout_s = 120
# Started beforehand by you: qualify neither starts nor stops it.
attach = true

{{ reasoning_note|comment }}
{% for level, effort in levels %}
[reasoning.{{ level }}]
{% if effort %}
reasoning_effort = {{ effort|toml }}
{% endif %}

{% endfor %}
[stages]
{{ stages_note|comment }}
run = {{ run|toml }}
{% if control %}

[stages.ab]
control = {{ control|toml }}
{% endif %}
"""
)

CONTROL = _ENV.from_string(
    """\
{{ header|comment }}
schema_version = 1
extends = {{ extends|toml }}
name = {{ name|toml }}
variable = {{ variable|toml }}

[overrides]
"server.base_url" = {{ url|toml }}
{% for pin in pins %}
{{ pin }}
{% endfor %}
"""
)


def _levels(server: Server) -> tuple[list[tuple[str, str | None]], str]:
    said = "Reasoning levels: the request fields merged into every request at each level."
    how = reasoning(server)
    if how is None:
        return [("default", None)], (
            f"{said} The server reports no reasoning parser, so one level that adds nothing; "
            "for a model that reasons write levels such as [reasoning.off] reasoning_effort = "
            '"none" and [reasoning.think] reasoning_effort = "medium".'
        )
    return [("off", "none"), ("think", "medium")], (
        f"{said} The server reasons with {how[0]} (read from {how[1]}): `off` asks for no "
        "reasoning, `think` for some (vLLM, SGLang and llama-server all read reasoning_effort)."
    )


def render_candidate(
    server: Server, name: str, control: str | None, api_key_env: str | None
) -> str:
    """The candidate file's text: every pin, the attached server, levels and stages."""
    pins = pins_of(server)
    build = next(p.value for p in pins if p.name == "engine_build")
    unread = [p.name for p in pins if p.source is None or p.note]
    run = [s for s in default_run() if control or s != "ab"]
    levels, reasoning_note = _levels(server)
    engine = SPELLED.get(server.engine.name, server.engine.name)
    header = (
        f"{server.model} on {engine} {build}, attached at {server.url}.\n"
        "Written by `qualify init` from what the server reports about itself, read as the "
        "identity stage reads it: each pin names where it was read. "
        + (f"To set by hand: {', '.join(unread)}." if unread else "Every pin was read.")
    )
    stages_note = (
        "The default stages (capacity, the load search, runs when named); a first look takes a "
        'minute with run = ["identity", "preflight"].'
    )
    if not control:
        stages_note += (
            " No ab: the paired A/B needs a control, the same recipe on a second server with "
            "one thing changed (`qualify init --attach URL --control-url URL2` writes one)."
        )
    return CANDIDATE.render(
        header=header,
        name=name,
        description=f"{server.model} on {engine} {build}, attached at {server.url}",
        pins=[pin_text(p, server.engine.name) for p in pins],
        url=server.url,
        api_key_env=api_key_env,
        levels=levels,
        reasoning_note=reasoning_note,
        stages_note=stages_note,
        run=run,
        control=control,
    )


def _variable(diff: list[Pin], url: str) -> str:
    names = [p.name for p in diff]
    spec = next((p.value for p in diff if p.name == "speculation"), None)
    if isinstance(spec, dict) and spec.get("method") == "none":
        others = [n for n in names if n != "speculation"]
        return "speculative decoding off" + (f" (also: {', '.join(others)})" if others else "")
    if names:
        return "differs in " + ", ".join(names)
    return f"the server at {url} (it reports no pin that differs: say what the variable is)"


def render_control(candidate: Server, control: Server, extends: str, name: str) -> str:
    """The control file's text: the candidate it extends, and each pin its server reports
    otherwise (plus its base URL) as an override."""
    mine = {p.name: p for p in pins_of(candidate)}
    theirs = pins_of(control)
    diff = [
        p
        for p in theirs
        if p.source is not None and (mine[p.name].source is None or mine[p.name].value != p.value)
    ]
    inherited = [p.name for p in theirs if p.source is None and mine[p.name].source is not None]
    header = (
        f"The control of {extends}: {control.model} on "
        f"{SPELLED.get(control.engine.name, control.engine.name)} at {control.url}, "
        "written by `qualify init --control-url` from what that server reports. Overrides: the "
        "pins it reports otherwise than the candidate's server."
        + (f" Not reported here, so the candidate's: {', '.join(inherited)}." if inherited else "")
    )
    lines = [
        f'{comment("read from " + str(p.source))}\n"identity.{p.name}" = {toml_value(p.value)}'
        for p in diff
    ]
    return CONTROL.render(
        header=header,
        extends=extends,
        name=name,
        variable=_variable(diff, control.url),
        url=control.url,
        pins=lines,
    )
