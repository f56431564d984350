"""Identity: what a server reports about itself, and how a pin is judged against it.

Each engine's adapter (`qualify.serving.engine`) reads the server's reports and the launch flags
into pins (`Seen`: the value, where it was read, and what kind of source proved it) and compares
them with the candidate's, in the engine's own words (never raw string equality); this module
holds what every engine shares.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Required, TypedDict

from pydantic import JsonValue

from qualify.candidate import Identity, Parallelism
from qualify.httpclient.chat import Quirks
from qualify.records import StrictModel
from qualify.serving.dialects import VLLM, Dialect

PINS = tuple(Identity.model_fields)  # the candidate's pins, in its order
PARALLEL = tuple(Parallelism.model_fields)  # the parallelism pin's keys, expert parallelism last
Match = tuple[bool | None, str]  # True same, False different, None cannot tell; and a note
HEX = re.compile(r"^[0-9a-f]{7,40}$")
_GIT_IN_VERSION = re.compile(r"\+g([0-9a-f]{7,40})\b")


class ImageReport(TypedDict, total=False):
    """What the container runtime reports of an image (`qualify.identity.stage.inspect_image`)."""

    image: Required[str]
    id: str
    repo_digests: list[str]
    error: str


@dataclass(frozen=True)
class Launch:
    """How qualify itself started the server: its argv, its environment, and, for a container,
    what the runtime reports of the image (`id`, `repo_digests`, or `error`)."""

    kind: str  # "local" | "container"
    args: list[str]
    env: dict[str, str] = field(default_factory=dict)
    image: ImageReport | None = None


# Which kind of source proved a pin: the server's own report, the container runtime's, qualify's
# own argv (what was asked for, not what the server did), or the server one part and the argv
# the rest.
ProvedBy = Literal["server", "runtime", "launch", "server+launch"]


class Seen(StrictModel):
    """One pin as the server or the launch shows it, as the identity record keeps it: `value`
    is what the engine's adapter read out of the server's raw JSON (or the argv), in the
    server's own words and shape (a model id list, a build string, a speculation table),
    compared and never interpreted; `source` says where it was read."""

    value: JsonValue = None
    source: str
    by: ProvedBy = "server"

    def __init__(self, value: object, source: str, by: ProvedBy = "server") -> None:
        super().__init__(**{"value": value, "source": source, "by": by})


@dataclass
class Observed:
    """What one engine's adapter reads its pins from, and fills (`EngineAdapter._observe`): the
    server's answers by path (`bodies`, raw JSON or text), the launch, the `/v1/models` entries;
    `seen`, each pin read, and `why`, why one cannot be."""

    bodies: dict[str, object]  # the server's answers (JSON or text), by the path asked
    launch: Launch | None
    models: list[dict[str, object]]  # raw `/v1/models` entries, as the server sent them
    seen: dict[str, Seen] = field(default_factory=dict)
    why: dict[str, str] = field(default_factory=dict)


def flag(args: list[str], *names: str) -> str | None:
    """The value of the last of `names` in `args` (`--x v` or `--x=v`), or None."""
    found: str | None = None
    for i, a in enumerate(args):
        for n in names:
            if a == n and i + 1 < len(args):
                found = args[i + 1]
            elif a.startswith(n + "="):
                found = a[len(n) + 1 :]
    return found


def to_int(text: str | None, default: int | None = None) -> int | None:
    try:
        return int(text) if text is not None else default
    except ValueError:
        return None


def _digest(ref: str) -> str:
    return ref.rsplit("@", 1)[-1].lower()


def version_match(pinned: str, version: str, engine: str) -> Match:
    """A version pin against a version string; a git SHA pin only when the version carries
    `+g<sha>` (a development build), otherwise it cannot be told."""
    p, v = pinned.strip().lower().removeprefix("v"), version.strip().lower().removeprefix("v")
    if HEX.match(p) and not p.isdigit():
        m = _GIT_IN_VERSION.search(v)
        if m is None:
            return None, (
                f"{engine} reports version {version!r}, which names no commit: a git SHA pin "
                "cannot be checked against a release version"
            )
        sha = m.group(1)
        return sha.startswith(p) or p.startswith(sha), f"commit {sha} from version {version!r}"
    return v == p or v.startswith(p + "+"), ""


class EngineAdapter:
    """One engine: reads its own reports and launch flags into pins, and compares them; its
    `/metrics` names and its request quirks (`Quirks`, passed to the HTTP client as data). An
    engine's adapter fills `_observe` and refines `same` in its own words.
    """

    name = ""
    owned_by = ""
    paths: tuple[str, ...] = ()  # the GET paths read besides `/v1/models`
    text_paths: tuple[str, ...] = ()  # of those, the ones read as text (Prometheus pages)
    probe_chat = False  # a 1-token completion read for what all answers carry (a fingerprint)
    metrics: Dialect = VLLM
    quirks: Quirks = Quirks(reasoning_fields=("reasoning_content",))
    # How a chat prompt is counted: `tokenize` posts the messages to /tokenize;
    # `apply-template+tokenize` renders them with /apply-template, then tokenizes the text.
    sizing = "tokenize"
    context_per_slot = False  # the context is split over slots (a request gets total / slots)
    # How the server reports its KV capacity: "slots" (slots x per-slot context), "startup-log" (a
    # line of its log; the gauge is a usage fraction), "pool-gauge" (a gauge of the pool's tokens);
    # `kv_log` the log lines read, `kv_note` what the figures mean.
    kv_report = "startup-log"
    kv_log: tuple[tuple[str, str], ...] = ()
    kv_note = ""
    aliases: ClassVar[dict[str, str]] = {}  # the engine's method names in the candidate's words

    def observe(
        self, bodies: dict[str, object], launch: Launch | None
    ) -> tuple[dict[str, Seen], dict[str, str]]:
        """Every pin as seen (value, source), or the reason it cannot be seen."""
        models = [m for m in models_of(bodies.get("/v1/models")) if isinstance(m, dict)]
        o = Observed(bodies, launch, models)
        seen, why = o.seen, o.why
        if models:
            ids = [m.get("id") for m in models] + [
                a for m in models for a in m.get("aliases") or []
            ]
            seen["model"] = Seen(ids, "GET /v1/models id")
            seen["engine"] = Seen(models[0].get("owned_by"), "GET /v1/models owned_by")
        else:
            why["model"] = why["engine"] = "GET /v1/models listed no model"
        if launch is None:
            why["image_digest"] = "attached to a running server: no runtime reports its image"
        elif launch.kind == "local":
            seen["image_digest"] = Seen(None, "launch: a local process, no image", "launch")
        elif launch.image is None or launch.image.get("error"):
            err = launch.image.get("error", "not inspected") if launch.image else "not inspected"
            why["image_digest"] = f"the container runtime did not report the image: {err}"
        else:
            seen["image_digest"] = Seen(launch.image, "container runtime (inspect)", "runtime")
        self._observe(o)
        for pin in PINS:
            if pin not in seen and pin not in why:
                why[pin] = f"{self.name} reports no {pin}"
        return seen, why

    def _observe(self, o: Observed) -> None:
        raise NotImplementedError

    def same(self, pin: str, pinned: Any, seen: Any) -> Match:  # raw JSON values
        """Whether the pinned value and the seen one name the same thing (never raw strings)."""
        if pin == "model":
            names = seen if isinstance(seen, list) else [seen]
            return pinned in names, ""
        if pin == "engine":
            return seen == self.owned_by, f"owned_by {self.owned_by!r} means {self.name}"
        if pin == "image_digest":
            return same_image(pinned, seen)
        if pin == "engine_build":
            return version_match(str(pinned), str(seen), self.name)
        if pin == "speculation":
            return self._same_speculation(pinned, seen)
        if pin == "parallelism":
            return same_fields(pinned, seen)
        if pin == "kv_dtype":
            return self._same_kv(str(pinned), str(seen))
        if isinstance(pinned, int) or isinstance(seen, int):
            return to_int(str(seen)) == pinned, ""
        return str(pinned).strip().lower() == str(seen).strip().lower(), ""

    def _same_kv(self, pinned: str, seen: str) -> Match:
        return pinned.strip().lower() == seen.strip().lower(), ""

    def method(self, name: str) -> str:
        """The engine's speculative method name in the candidate's words."""
        n = name.strip().lower()
        return self.aliases.get(n, n)

    def _same_speculation(self, pinned: Any, seen: Any) -> Match:  # raw JSON values
        p, s = dict(pinned or {}), dict(seen or {})
        if self.method(str(p.get("method", "none"))) != self.method(str(s.get("method"))):
            return False, ""
        if self.method(str(s.get("method"))) == "none":
            return True, ""
        if s.get("draft_tokens") is None:
            return None, s.get("why") or "the draft length is not known"
        if int(s["draft_tokens"]) != int(p.get("draft_tokens") or 0):
            return False, ""
        model = s.get("draft_model")
        if p.get("draft_model") and model is not None and str(p["draft_model"]) not in str(model):
            return False, ""
        return True, ""


def models_of(body: object) -> list[object]:
    data = body.get("data") if isinstance(body, dict) else None
    return data if isinstance(data, list) else []


def same_image(pinned: object, seen: object) -> Match:
    if not isinstance(seen, dict):
        return (True, "") if pinned is None else (False, "the server ran as a local process")
    launched = str(seen.get("image") or "")
    if pinned is None:
        return False, f"the server ran from image {launched}, which no pin names"
    digests = {_digest(d) for d in seen.get("repo_digests") or []}
    if seen.get("id"):
        digests.add(str(seen["id"]).lower())
    return _digest(str(pinned)) in digests, ""


def same_fields(pinned: Any, seen: Any) -> Match:  # raw JSON values
    p, s = dict(pinned or {}), dict(seen or {})
    unknown = [k for k in p if k not in s]
    differ = [k for k in p if k in s and s[k] != p[k]]
    if differ:
        return False, "differ: " + ", ".join(differ)
    if unknown:
        return None, "not seen: " + ", ".join(unknown)
    return True, ""


def context_from_models(models: list[dict[str, object]], seen: dict[str, Seen]) -> None:
    """vLLM and SGLang report the window of a request as `max_model_len` in `/v1/models`."""
    lens = [m.get("max_model_len") for m in models if m.get("max_model_len")]
    if lens:
        seen["context_length"] = Seen(lens[0], "GET /v1/models max_model_len")
