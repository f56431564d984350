"""Where each engine keeps its numbers (metric names, idle gauges) and how it reports its
identity: one adapter per engine reads the server's reports and the launch flags into pins and
compares them with the candidate's, in the engine's own words (never raw string equality).

Names checked against the engines' sources (see docs/engines.md): vLLM 0.33, SGLang 0.5.23 and
the llama.cpp bundled with llama-cpp-python 0.3.36.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

from prometheus_client.parser import text_string_to_metric_families


@dataclass(frozen=True)
class Dialect:
    """Which `/metrics` series of one engine mean what.

    Counters and queue gauges are summed over their label sets (vLLM `{engine, model_name}`,
    SGLang's `tp_rank`/`pp_rank`/`dp_rank`); a series in `means` (a fraction, or a value of the
    last batch) is averaged over them instead, since adding two ranks' rates means nothing.
    """

    name: str
    running: tuple[str, ...]
    waiting: tuple[str, ...]
    spec_drafts: str | None
    spec_draft_tokens: str | None
    spec_accepted: str | None
    spec_per_pos: str | None
    spec_gauges: tuple[str, ...] = ()  # last-batch values, never a delta
    spec_verify_calls: str | None = None  # one verify call per draft (SGLang)
    spec_width: str | None = None  # draft tokens per verify call, the verified one included
    spec_missing: str = "spec-counters-absent"  # the inconclusive's name when none is exposed
    generated: tuple[str, ...] = ()
    prompt_cached: tuple[str, ...] = ()
    kv_capacity: tuple[str, ...] = ()
    means: frozenset[str] = frozenset()
    info_paths: tuple[str, ...] = field(default_factory=tuple)
    # Latency histograms the server keeps (key -> family name without _sum/_count): decode,
    # generation_tokens, ttft, prefill, queue, itl (`qualify.serving.histograms`).
    histograms: tuple[tuple[str, str], ...] = ()

    def read(self, snap: MetricsSnapshot, name: str) -> float | None:
        """One series over its label sets: the mean for a fraction or last-batch gauge, else
        the sum; None when the page does not have it."""
        return snap.mean(name) if name in self.means else snap.total(name)

    def spec_names(self) -> tuple[str, ...]:
        """Every series speculative decoding is read from, in the order they are tried."""
        names = (
            self.spec_draft_tokens,
            self.spec_accepted,
            self.spec_drafts,
            self.spec_verify_calls,
            *((self.generated[0],) if self.spec_verify_calls and self.generated else ()),
            self.spec_width,
            *self.spec_gauges,
        )
        return tuple(n for n in names if n)


VLLM = Dialect(
    name="vllm",
    running=("vllm:num_requests_running",),
    waiting=("vllm:num_requests_waiting",),
    spec_drafts="vllm:spec_decode_num_drafts_total",
    spec_draft_tokens="vllm:spec_decode_num_draft_tokens_total",
    spec_accepted="vllm:spec_decode_num_accepted_tokens_total",
    spec_per_pos="vllm:spec_decode_num_accepted_tokens_per_pos_total",
    generated=("vllm:generation_tokens_total",),
    prompt_cached=("vllm:prompt_tokens_cached_total", "vllm:prefix_cache_hits_total"),
    kv_capacity=("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
    means=frozenset({"vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"}),
    info_paths=("/version",),
    histograms=(
        ("decode", "vllm:request_decode_time_seconds"),
        ("generation_tokens", "vllm:request_generation_tokens"),
        ("ttft", "vllm:time_to_first_token_seconds"),
        ("prefill", "vllm:request_prefill_time_seconds"),
        ("queue", "vllm:request_queue_time_seconds"),
        ("itl", "vllm:inter_token_latency_seconds"),
    ),
)
SGLANG = Dialect(
    name="sglang",
    running=("sglang:num_running_reqs",),
    waiting=("sglang:num_queue_reqs",),
    spec_drafts=None,
    spec_draft_tokens=None,
    spec_accepted=None,
    spec_per_pos=None,
    spec_gauges=("sglang:spec_accept_length", "sglang:spec_accept_rate"),
    spec_verify_calls="sglang:spec_verify_calls_total",
    spec_width="sglang:spec_num_draft_tokens",
    spec_missing="spec-gauges-absent",
    generated=("sglang:generation_tokens_total",),
    prompt_cached=("sglang:cached_tokens_total",),
    kv_capacity=("sglang:max_total_num_tokens", "sglang:token_usage"),
    means=frozenset(
        {
            "sglang:token_usage",
            "sglang:spec_accept_length",
            "sglang:spec_accept_rate",
            "sglang:spec_num_steps",
            "sglang:spec_num_draft_tokens",
            "sglang:cache_hit_rate",
        }
    ),
    info_paths=("/server_info", "/get_server_info", "/model_info"),
)
LLAMACPP = Dialect(
    name="llama.cpp",
    running=("llamacpp:requests_processing",),
    waiting=("llamacpp:requests_deferred",),
    spec_drafts="llamacpp:spec_decode_num_drafts_total",
    spec_draft_tokens="llamacpp:spec_decode_num_draft_tokens_total",
    spec_accepted="llamacpp:spec_decode_num_accepted_tokens_total",
    spec_per_pos="llamacpp:spec_decode_num_accepted_tokens_per_pos_total",
    generated=("llamacpp:tokens_predicted_total",),
    prompt_cached=("llamacpp:prompt_tokens_cached_total",),
    info_paths=("/props",),
)
DIALECTS = {d.name: d for d in (VLLM, SGLANG, LLAMACPP)}


def dialect(engine: str) -> Dialect:
    """The metric names of an engine (its adapter's `metrics`)."""
    return DIALECTS[engine]


Labels = tuple[tuple[str, str], ...]


@dataclass
class MetricsSnapshot:
    """One scrape of `/metrics`: every sample by name and sorted labels. The `_created`
    timestamps prometheus_client adds beside each counter are left out: they are not values."""

    samples: dict[str, dict[Labels, float]]
    t: float = 0.0

    @classmethod
    def parse(cls, text: str, t: float = 0.0) -> MetricsSnapshot:
        samples: dict[str, dict[Labels, float]] = {}
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                if s.name.endswith("_created"):
                    continue
                labels = tuple(sorted(s.labels.items()))
                samples.setdefault(s.name, {})[labels] = float(s.value)
        return cls(samples, t)

    def has(self, name: str) -> bool:
        return name in self.samples

    def total(self, name: str) -> float | None:
        """Sum over every label set (e.g. over ranks), or None if the metric is absent."""
        series = self.samples.get(name)
        return None if series is None else sum(series.values())

    def mean(self, name: str) -> float | None:
        """Mean over every label set (a fraction per rank), or None if the metric is absent."""
        series = self.samples.get(name)
        return None if not series else sum(series.values()) / len(series)

    def first(self, names: tuple[str, ...]) -> float | None:
        for n in names:
            v = self.total(n)
            if v is not None:
                return v
        return None

    def labels_of(self, name: str) -> dict[str, str]:
        """The labels of an info series (`vllm:cache_config_info`, value 1): its first
        label set."""
        series = self.samples.get(name) or {}
        return dict(next(iter(series))) if series else {}

    def by_label(self, name: str, label: str) -> dict[str, float]:
        out: dict[str, float] = {}
        for labels, value in (self.samples.get(name) or {}).items():
            d = dict(labels)
            if label in d:
                out[d[label]] = out.get(d[label], 0.0) + value
        return out


def busy(snapshot: MetricsSnapshot, d: Dialect) -> tuple[float | None, float | None]:
    """Running and waiting request counts, or None where the engine does not expose them."""
    return snapshot.first(d.running), snapshot.first(d.waiting)


# --- Identity: what each engine says about itself, and how its words compare with a pin -------

PINS = (
    "model",
    "revision",
    "engine",
    "engine_build",
    "image_digest",
    "quantization",
    "kv_dtype",
    "parallelism",
    "context_length",
    "max_num_seqs",
    "speculation",
)
Match = tuple[bool | None, str]  # True same, False different, None cannot tell; and a note
_HEX = re.compile(r"^[0-9a-f]{7,40}$")
_GIT_IN_VERSION = re.compile(r"\+g([0-9a-f]{7,40})\b")


@dataclass(frozen=True)
class Launch:
    """How qualify itself started the server: its argv, its environment, and, for a container,
    what the runtime reports of the image (`id`, `repo_digests`, or `error`)."""

    kind: str  # "local" | "container"
    args: list[str]
    env: dict[str, str] = field(default_factory=dict)
    image: dict[str, Any] | None = None


@dataclass(frozen=True)
class Seen:
    """One pin as the server or the launch shows it: the value, where it was read, and which
    kind of source proved it: `server` (the server's own report), `runtime` (the container
    runtime's), or `launch` (qualify's own argv: what was asked for, not what the server did)."""

    value: Any
    source: str
    by: str = "server"


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


def _int(text: str | None, default: int | None = None) -> int | None:
    try:
        return int(text) if text is not None else default
    except ValueError:
        return None


def _digest(ref: str) -> str:
    return ref.rsplit("@", 1)[-1].lower()


def _version_match(pinned: str, version: str, engine: str) -> Match:
    """A version pin against a version string; a git SHA pin only when the version carries
    `+g<sha>` (a development build), otherwise it cannot be told."""
    p, v = pinned.strip().lower().removeprefix("v"), version.strip().lower().removeprefix("v")
    if _HEX.match(p) and not p.isdigit():
        m = _GIT_IN_VERSION.search(v)
        if m is None:
            return None, (
                f"{engine} reports version {version!r}, which names no commit: a git SHA pin "
                "cannot be checked against a release version"
            )
        sha = m.group(1)
        return sha.startswith(p) or p.startswith(sha), f"commit {sha} from version {version!r}"
    return v == p or v.startswith(p + "+"), ""


# --- Errors: nested `{"error": {...}}` (vLLM since 0.10.1, llama-server) or flat (SGLang) ----


@dataclass(frozen=True)
class EngineError:
    """An error body read in the engine's words. `kind` is `over-length` (the prompt alone is
    over the window), `over-request` (prompt plus max_tokens is), or None (another error)."""

    message: str
    type: str | None
    param: str | None
    shape: str  # "nested" | "flat"
    kind: str | None = None
    limit: int | None = None
    prompt_tokens: int | None = None


# (kind, pattern with named groups `limit` and `prompt`), per engine, as each words it.
_VLLM_LENGTH: tuple[tuple[str, str], ...] = (
    (
        # vLLM 0.26.0, recorded (chat and Responses alike): the prompt is tokenized only up to
        # the window, so its size is a lower bound ("at least").
        "over-length",
        r"maximum context length is (?P<limit>\d+) tokens\. However, you requested \d+ output "
        r"tokens and your prompt contains at least (?P<prompt>\d+) input tokens",
    ),
    (
        "over-length",
        r"maximum context length is (?P<limit>\d+) tokens\. However, your prompt contains "
        r"(?P<prompt>\d+) input tokens",
    ),
    (
        "over-length",
        r"The engine prompt length (?P<prompt>\d+) exceeds the max_model_len (?P<limit>\d+)",
    ),
    (
        "over-length",
        r"The decoder prompt \(length (?P<prompt>\d+)\) is longer than the maximum model length "
        r"of (?P<limit>\d+)",
    ),
    (
        "over-request",
        r"maximum context length is (?P<limit>\d+) tokens\. However, you requested \d+ tokens "
        r"\((?P<prompt>\d+) in the messages",
    ),
    (
        "over-request",
        r"max_tokens=\d+ cannot be greater than max_model_len=(?:max_total_tokens=)?(?P<limit>\d+)",
    ),
)
_SGLANG_LENGTH: tuple[tuple[str, str], ...] = (
    (
        "over-length",
        r"The input \((?P<prompt>\d+) tokens\) is longer than the model's context length "
        r"\((?P<limit>\d+) tokens\)",
    ),
    (
        "over-request",
        r"maximum context length of (?P<limit>\d+) tokens\. You requested a total of \d+ tokens: "
        r"(?P<prompt>\d+) tokens from the input",
    ),
)
_LLAMACPP_LENGTH: tuple[tuple[str, str], ...] = (
    (
        "over-length",
        r"request \((?P<prompt>\d+) tokens\) exceeds the available context size "
        r"\((?P<limit>\d+) tokens\)",
    ),
)

# Every field a chat message or delta may carry reasoning in, across the engines.
REASONING_FIELDS = ("reasoning", "reasoning_content")


class EngineAdapter:
    """Reads one engine's own reports and launch flags into pins, and compares them."""

    name = ""
    owned_by = ""
    paths: tuple[str, ...] = ()  # GET paths read besides /v1/models
    text_paths: tuple[str, ...] = ()  # of those, the ones read as text (Prometheus pages)
    probe_chat = False  # one 1-token completion read for what every answer carries
    metrics: Dialect = VLLM
    # How a chat prompt is counted: `tokenize` posts the messages to /tokenize;
    # `apply-template+tokenize` renders them with /apply-template, then tokenizes the text.
    sizing = "tokenize"
    # True when the server splits its context over slots (a request gets total / slots).
    context_per_slot = False
    reasoning_fields: tuple[str, ...] = ("reasoning_content",)
    error_shape = "nested"
    _length_errors: tuple[tuple[str, str], ...] = ()
    # How the server reports its KV capacity: "slots" (slots x per-slot context),
    # "startup-log" (a line of its log; the gauge is a usage fraction), "pool-gauge" (a gauge of
    # the pool's tokens); the log lines read and what the figures mean.
    kv_report = "startup-log"
    kv_log: tuple[tuple[str, str], ...] = ()
    kv_note = ""

    def reasoning(self, obj: dict[str, Any]) -> str:
        """The reasoning text of a message or delta, from the first field that holds text."""
        for key in self.reasoning_fields:
            value = obj.get(key)
            if isinstance(value, str):
                return value
        return ""

    def error(self, body: Any) -> EngineError | None:
        """An error body in either shape, with the window and prompt size an over-length
        message names; None when the body is not an error."""
        if not isinstance(body, dict):
            return None
        nested = body.get("error")
        if isinstance(nested, dict):
            err, shape = nested, "nested"
        elif body.get("object") == "error" or ("message" in body and "choices" not in body):
            err, shape = body, "flat"
        else:
            return None
        message = str(err.get("message") or "")
        param = err.get("param")
        out = EngineError(
            message,
            err.get("type") if isinstance(err.get("type"), str) else None,
            param if isinstance(param, str) else None,
            shape,
        )
        for kind, pattern in self._length_errors:
            m = re.search(pattern, message)
            if m is not None:
                found = m.groupdict()
                prompt = found.get("prompt")
                return replace(
                    out,
                    kind=kind,
                    limit=int(found["limit"]),
                    prompt_tokens=int(prompt) if prompt else None,
                )
        return out

    def observe(
        self, bodies: dict[str, Any], launch: Launch | None
    ) -> tuple[dict[str, Seen], dict[str, str]]:
        """Every pin as seen (value, source), or the reason it cannot be seen."""
        seen: dict[str, Seen] = {}
        why: dict[str, str] = {}
        models = [m for m in _data(bodies.get("/v1/models")) if isinstance(m, dict)]
        if models:
            ids = [m.get("id") for m in models] + [
                a for m in models for a in m.get("aliases") or []
            ]
            seen["model"] = Seen(ids, "GET /v1/models id")
            seen["engine"] = Seen(models[0].get("owned_by"), "GET /v1/models owned_by")
        else:
            why["model"] = why["engine"] = "GET /v1/models listed no model"
        self._image(seen, why, launch)
        self._observe(bodies, launch, models, seen, why)
        for pin in PINS:
            if pin not in seen and pin not in why:
                why[pin] = f"{self.name} reports no {pin}"
        return seen, why

    def _observe(
        self,
        bodies: dict[str, Any],
        launch: Launch | None,
        models: list[dict[str, Any]],
        seen: dict[str, Seen],
        why: dict[str, str],
    ) -> None:
        raise NotImplementedError

    @staticmethod
    def _image(seen: dict[str, Seen], why: dict[str, str], launch: Launch | None) -> None:
        if launch is None:
            why["image_digest"] = "attached to a running server: no runtime reports its image"
        elif launch.kind == "local":
            seen["image_digest"] = Seen(None, "launch: a local process, no image", "launch")
        elif launch.image is None or launch.image.get("error"):
            err = (launch.image or {}).get("error", "not inspected")
            why["image_digest"] = f"the container runtime did not report the image: {err}"
        else:
            seen["image_digest"] = Seen(launch.image, "container runtime (inspect)", "runtime")

    def same(self, pin: str, pinned: Any, seen: Any) -> Match:
        """Whether the pinned value and the seen one name the same thing (never raw strings)."""
        if pin == "model":
            names = seen if isinstance(seen, list) else [seen]
            return pinned in names, ""
        if pin == "engine":
            return seen == self.owned_by, f"owned_by {self.owned_by!r} means {self.name}"
        if pin == "image_digest":
            return _same_image(pinned, seen)
        if pin == "engine_build":
            return _version_match(str(pinned), str(seen), self.name)
        if pin == "speculation":
            return self._same_speculation(pinned, seen)
        if pin == "parallelism":
            return _same_fields(pinned, seen)
        if pin == "kv_dtype":
            return self._same_kv(str(pinned), str(seen))
        if isinstance(pinned, int) or isinstance(seen, int):
            return _int(str(seen)) == pinned, ""
        return str(pinned).strip().lower() == str(seen).strip().lower(), ""

    def _same_kv(self, pinned: str, seen: str) -> Match:
        return pinned.strip().lower() == seen.strip().lower(), ""

    def method(self, name: str) -> str:
        """The engine's speculative method name in the candidate's words."""
        return name.strip().lower()

    def _same_speculation(self, pinned: Any, seen: Any) -> Match:
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


def _data(body: Any) -> list[Any]:
    data = body.get("data") if isinstance(body, dict) else None
    return data if isinstance(data, list) else []


def _same_image(pinned: Any, seen: Any) -> Match:
    if not isinstance(seen, dict):
        return (True, "") if pinned is None else (False, "the server ran as a local process")
    launched = str(seen.get("image") or "")
    if pinned is None:
        return False, f"the server ran from image {launched}, which no pin names"
    digests = {_digest(d) for d in seen.get("repo_digests") or []}
    if seen.get("id"):
        digests.add(str(seen["id"]).lower())
    return _digest(str(pinned)) in digests, ""


def _same_fields(pinned: Any, seen: Any) -> Match:
    p, s = dict(pinned or {}), dict(seen or {})
    unknown = [k for k in p if k not in s]
    differ = [k for k in p if k in s and s[k] != p[k]]
    if differ:
        return False, "differ: " + ", ".join(differ)
    if unknown:
        return None, "not seen: " + ", ".join(unknown)
    return True, ""


# llama.cpp's llama_ftype_name (src/llama-model-loader.cpp) against the names people write.
_FTYPES = {
    "all F32": ("F32",),
    "Q2_K - Medium": ("Q2_K", "Q2_K_M"),
    "Q2_K - Small": ("Q2_K_S",),
    "Q3_K - Small": ("Q3_K_S",),
    "Q3_K - Medium": ("Q3_K_M", "Q3_K"),
    "Q3_K - Large": ("Q3_K_L",),
    "Q4_K - Small": ("Q4_K_S",),
    "Q4_K - Medium": ("Q4_K_M", "Q4_K"),
    "Q5_K - Small": ("Q5_K_S",),
    "Q5_K - Medium": ("Q5_K_M", "Q5_K"),
    "MXFP4 MoE": ("MXFP4_MOE", "MXFP4"),
    "IQ3_S mix - 3.66 bpw": ("IQ3_M",),
}


def llamacpp_quant_names(ftype: str) -> tuple[str, ...]:
    """The names a llama-server `model_ftype` answers to: `Q4_K - Medium` is `Q4_K_M`,
    `IQ2_XS - 2.3125 bpw` is `IQ2_XS`; a `(guessed) ` prefix is dropped."""
    name = ftype.strip().removeprefix("(guessed) ")
    if name in _FTYPES:
        return _FTYPES[name]
    return (name.split(" - ", 1)[0].strip().upper().replace(" ", "_"),)


class LlamaCpp(EngineAdapter):
    name, owned_by, paths = "llama.cpp", "llamacpp", ("/props", "/slots")
    metrics = LLAMACPP
    sizing = "apply-template+tokenize"
    context_per_slot = True
    _length_errors = _LLAMACPP_LENGTH
    kv_report = "slots"
    kv_log = (
        ("n_slots", r"n_slots = (\d+)"),
        ("n_ctx_slot", r"n_ctx_slot = (\d+)"),
        ("kv_buffer_mib", r"KV buffer size\s*=\s*([\d.]+) MiB"),
    )
    kv_note = "llama.cpp exposes no KV gauge on /metrics; figures come from the startup log"

    def error(self, body: Any) -> EngineError | None:
        """llama-server also states the window and prompt as `n_ctx`, `n_prompt_tokens`."""
        out = super().error(body)
        err = body.get("error") if isinstance(body, dict) else None
        if out is None or not isinstance(err, dict) or not isinstance(err.get("n_ctx"), int):
            return out
        prompt = err.get("n_prompt_tokens")
        return replace(
            out,
            kind="over-length",
            limit=err["n_ctx"],
            prompt_tokens=prompt if isinstance(prompt, int) else out.prompt_tokens,
        )

    def _observe(
        self,
        bodies: dict[str, Any],
        launch: Launch | None,
        models: list[dict[str, Any]],
        seen: dict[str, Seen],
        why: dict[str, str],
    ) -> None:
        props = bodies.get("/props") if isinstance(bodies.get("/props"), dict) else None
        why["revision"] = "llama-server reports the model file (/props model_path), no revision"
        if props is None:
            for pin in ("engine_build", "quantization", "context_length", "max_num_seqs"):
                why[pin] = "GET /props did not answer"
        else:
            dgs = props.get("default_generation_settings") or {}
            if props.get("build_info"):
                seen["engine_build"] = Seen(props["build_info"], "GET /props build_info")
            ftype = props.get("model_ftype") or ((models or [{}])[0].get("meta") or {}).get("ftype")
            if ftype:
                seen["quantization"] = Seen(ftype, "GET /props model_ftype")
            if isinstance(dgs.get("n_ctx"), int):
                seen["context_length"] = Seen(
                    dgs["n_ctx"], "GET /props default_generation_settings.n_ctx (one slot)"
                )
            if isinstance(props.get("total_slots"), int):
                seen["max_num_seqs"] = Seen(props["total_slots"], "GET /props total_slots")
        if launch is None:
            for pin in ("kv_dtype", "parallelism", "speculation"):
                why[pin] = "attached to a running server: its launch flags are not known"
            return
        args, env = launch.args, launch.env
        k = flag(args, "-ctk", "--cache-type-k") or env.get("LLAMA_ARG_CACHE_TYPE_K") or "f16"
        v = flag(args, "-ctv", "--cache-type-v") or env.get("LLAMA_ARG_CACHE_TYPE_V") or "f16"
        seen["kv_dtype"] = Seen(k if k == v else f"{k}/{v}", "launch flags -ctk/-ctv", "launch")
        split = flag(args, "-sm", "--split-mode") or env.get("LLAMA_ARG_SPLIT_MODE") or "layer"
        seen["parallelism"] = Seen(
            {"split_mode": split},
            "launch flag -sm (row or tensor split is tensor parallel over the visible GPUs)",
            "launch",
        )
        spec = self._spec(args, env)
        # /props params show a request's defaults ("speculative.types": "none" whatever the
        # launch); /slots says per slot whether it drafts (absent with --no-slots).
        slots = bodies.get("/slots")
        drafts = (
            [s.get("speculative") for s in slots if isinstance(s, dict)]
            if isinstance(slots, list)
            else []
        )
        source = "launch flags --spec-*"
        if drafts:
            source += ", GET /slots speculative"
            if not any(drafts) and spec["method"] != "none":
                spec = {"method": "none", "draft_tokens": 0, "launched": spec["method"]}
            elif all(drafts) and spec["method"] == "none":
                spec = {"method": "unknown", "draft_tokens": None, "why": "slots draft"}
        seen["speculation"] = Seen(spec, source, "server+launch" if drafts else "launch")

    def _spec(self, args: list[str], env: dict[str, str]) -> dict[str, Any]:
        types = flag(args, "--spec-type") or env.get("LLAMA_ARG_SPEC_TYPE")
        if types is None and "--spec-default" in args:
            types = "ngram-mod"
        method = types or "none"
        out: dict[str, Any] = {"method": method, "draft_tokens": None}
        if method == "none":
            return out
        if "," in method:
            out["why"] = f"several speculative types at once ({method}): no one draft length"
        elif method.startswith("draft-"):
            n = flag(args, "--spec-draft-n-max") or env.get("LLAMA_ARG_SPEC_DRAFT_N_MAX")
            out["draft_tokens"] = _int(n, 3)
            out["draft_model"] = flag(args, "--spec-draft-model", "-md", "--model-draft")
        elif method == "ngram-mod":
            out["draft_tokens"] = _int(flag(args, "--spec-ngram-mod-n-max"), 64)
        else:
            out["why"] = f"{method} drafts a length that no launch flag states"
        return out

    def same(self, pin: str, pinned: Any, seen: Any) -> Match:
        if pin == "quantization":
            names = llamacpp_quant_names(str(seen))
            p = str(pinned).strip().upper().replace("-", "_").replace(" ", "_")
            return p in names, f"llama.cpp file type {seen!r} is {' or '.join(names)}"
        if pin == "engine_build":
            return _llamacpp_build(str(pinned), str(seen))
        if pin == "parallelism":
            par: dict[str, Any] = dict(pinned or {})
            mode = dict(seen or {}).get("split_mode")
            if any(par.get(k, 1) != 1 for k in ("pipeline", "data", "decode_context")):
                return False, "llama-server has no pipeline, data or decode-context parallelism"
            if par.get("expert"):
                return False, "llama-server has no expert parallelism"
            if (par.get("tensor", 1) > 1) != (mode in ("row", "tensor")):
                return False, f"split mode {mode!r} against tensor = {par.get('tensor', 1)}"
            return True, f"split mode {mode!r}"
        return super().same(pin, pinned, seen)

    def method(self, name: str) -> str:
        """`draft-mtp` is the `mtp` a candidate writes; a plain draft model is `draft-model`."""
        n = name.strip().lower()
        if n in ("draft", "draft-model", "draft-simple"):
            return "draft-model"
        return n.removeprefix("draft-")


def _llamacpp_build(pinned: str, reported: str) -> Match:
    """`b1234-0c1e570` against a pin of the same, of `b1234`, or of the commit."""
    p, r = pinned.strip().lower(), reported.strip().lower()
    number, _, sha = r.partition("-")
    if p in (r, number):
        return True, ""
    if _HEX.match(p) and sha:
        return sha.startswith(p) or p.startswith(sha), f"commit {sha} from build {reported!r}"
    return False, ""


def _context_from_models(models: list[dict[str, Any]], seen: dict[str, Seen]) -> None:
    """vLLM and SGLang report the window of a request as `max_model_len` in `/v1/models`."""
    lens = [m.get("max_model_len") for m in models if m.get("max_model_len")]
    if lens:
        seen["context_length"] = Seen(lens[0], "GET /v1/models max_model_len")


SERVER_INFO = "/server_info?config_format=json"
CHAT_PROBE = "POST /v1/chat/completions"


class Vllm(EngineAdapter):
    """vLLM: what the server itself reports comes first, the launch flags second.

    Without `VLLM_SERVER_DEV_MODE=1` (when `/server_info` answers 404) the server reports, over
    HTTP: the served name, `max_model_len` and the weights' path (`/v1/models` `id`,
    `max_model_len`, `root`), its version (`/version`, and `system_fingerprint`
    `vllm-<version>-<config hash>` on every completion), the KV cache's dtype, block size,
    prefix caching and blocks (`vllm:cache_config_info` labels), the data-parallel engines
    (the `engine` label), and speculative decoding: its series exist only with
    `--speculative-config`, and `vllm:spec_decode_num_accepted_tokens_per_pos_total` has one
    `position` per draft token. It does not report the revision, the quantization, tensor or
    pipeline sizes, `max_num_seqs` or the speculative method; those come from `/server_info`
    (dev mode: the whole resolved config) or from the flags qualify launched it with.
    """

    name, owned_by = "vllm", "vllm"
    paths: tuple[str, ...] = ("/version", "/metrics", SERVER_INFO)
    text_paths: tuple[str, ...] = ("/metrics",)
    probe_chat = True
    metrics = VLLM
    # 0.33 sends `reasoning` only; builds 0.11-0.2x send both, the same text (0.26.0 recorded:
    # `reasoning` only).
    reasoning_fields: tuple[str, ...] = ("reasoning", "reasoning_content")
    _length_errors = _VLLM_LENGTH
    kv_report = "startup-log"
    kv_log: tuple[tuple[str, str], ...] = (
        ("kv_tokens", r"GPU KV cache size: ([\d,]+) tokens"),
        ("max_concurrency", r"Maximum concurrency for [\d,]+ tokens per request: ([\d.]+)x"),
        ("kv_memory_gib", r"Available KV cache memory: ([\d.]+) GiB"),
    )
    kv_note = (
        "kv_cache_usage_perc is 1 - free blocks / total: evictable prefix-cache blocks (no "
        "running request holds them) count as free"
    )
    _METHOD_ALIASES: ClassVar[dict[str, str]] = {
        "deepseek_mtp": "mtp",
        "ernie_mtp": "mtp",
        "qwen3_next_mtp": "mtp",
    }

    def _observe(
        self,
        bodies: dict[str, Any],
        launch: Launch | None,
        models: list[dict[str, Any]],
        seen: dict[str, Seen],
        why: dict[str, str],
    ) -> None:
        version = bodies.get("/version")
        fp = fingerprint(bodies.get(CHAT_PROBE))
        if isinstance(version, dict) and version.get("version"):
            src = "GET /version"
            if fp and fp[0] != str(version["version"]):
                src += f" (system_fingerprint says {fp[0]!r})"
            seen["engine_build"] = Seen(version["version"], src)
        elif fp:
            seen["engine_build"] = Seen(fp[0], "system_fingerprint of a completion")
        _context_from_models(models, seen)
        snap = _snapshot(bodies.get("/metrics"))
        config = server_config(bodies.get(SERVER_INFO))
        if config:
            self._from_config(config, seen)
        self._from_metrics(snap, seen, why)
        root = next((m.get("root") for m in models if m.get("root")), None)
        no_info = (
            "GET /server_info answered nothing (vLLM serves it only with VLLM_SERVER_DEV_MODE=1)"
        )
        if launch is not None:
            self._flags(launch.args, seen, why)
        for pin, what in (
            ("revision", "the weights' revision"),
            ("quantization", "the quantization"),
            ("parallelism", "tensor and pipeline sizes"),
            ("max_num_seqs", "max_num_seqs"),
        ):
            if pin in seen:
                continue
            told = f"vLLM reports {what} nowhere but /server_info; {no_info}"
            if pin == "revision" and root:
                told = f"/v1/models root is {root!r}, no revision; {no_info}"
            if launch is None:
                told += "; attached, so no launch flags either"
            why[pin] = why.get(pin) or told

    def _from_config(self, config: dict[str, Any], seen: dict[str, Seen]) -> None:
        """Pins from `/server_info` (dev mode): the resolved config, JSON or its text form."""
        src = "GET /server_info vllm_config"
        model = config.get("model_config") or {}
        if "revision" in model:
            seen["revision"] = Seen(model["revision"], f"{src} model_config.revision")
        if "quantization" in model:
            seen["quantization"] = Seen(model["quantization"], f"{src} model_config.quantization")
        cache = config.get("cache_config") or {}
        if cache.get("cache_dtype"):
            seen["kv_dtype"] = Seen(cache["cache_dtype"], f"{src} cache_config.cache_dtype")
        par = config.get("parallel_config") or {}
        if "tensor_parallel_size" in par:
            seen["parallelism"] = Seen(
                {
                    "tensor": par.get("tensor_parallel_size", 1),
                    "pipeline": par.get("pipeline_parallel_size", 1),
                    "data": par.get("data_parallel_size", 1),
                    "decode_context": par.get("decode_context_parallel_size", 1),
                    "expert": bool(par.get("enable_expert_parallel", False)),
                },
                f"{src} parallel_config",
            )
        sched = config.get("scheduler_config") or {}
        if isinstance(sched.get("max_num_seqs"), int):
            seen["max_num_seqs"] = Seen(sched["max_num_seqs"], f"{src} scheduler_config")
        if "speculative_config" in config:
            spec = config.get("speculative_config") or {}
            method = spec.get("method") if isinstance(spec, dict) else None
            seen["speculation"] = Seen(
                {
                    "method": method or "none",
                    "draft_tokens": spec.get("num_speculative_tokens") if method else 0,
                    "draft_model": spec.get("model") if method else None,
                },
                f"{src} speculative_config",
            )

    def _from_metrics(
        self, snap: MetricsSnapshot | None, seen: dict[str, Seen], why: dict[str, str]
    ) -> None:
        """Pins from `/metrics`: `cache_config_info` labels and the spec-decode series."""
        if snap is None:
            for pin in ("kv_dtype", "speculation"):
                why.setdefault(pin, "GET /metrics answered nothing readable")
            return
        info = snap.labels_of("vllm:cache_config_info")
        if "kv_dtype" not in seen and info.get("cache_dtype"):
            seen["kv_dtype"] = Seen(
                info["cache_dtype"], "GET /metrics vllm:cache_config_info cache_dtype"
            )
        if "speculation" in seen:
            return
        positions = snap.by_label(self.metrics.spec_per_pos or "", "position")
        if not snap.has(self.metrics.spec_drafts or ""):
            seen["speculation"] = Seen(
                {"method": "none", "draft_tokens": 0},
                "GET /metrics: no vllm:spec_decode_* series (vLLM registers them only with "
                "--speculative-config)",
            )
        elif positions:
            seen["speculation"] = Seen(
                {
                    "method": "unknown",
                    "draft_tokens": len(positions),
                    "why": "vLLM reports how many tokens it drafts but not the method",
                },
                "GET /metrics vllm:spec_decode_num_accepted_tokens_per_pos_total: "
                f"{len(positions)} position labels",
            )

    def _flags(self, args: list[str], seen: dict[str, Seen], why: dict[str, str]) -> None:
        """The pins the server did not report, from qualify's own argv (proof by assertion:
        what was asked for)."""
        for pin, names in (
            ("revision", ("--revision",)),
            ("quantization", ("--quantization", "-q")),
            ("max_num_seqs", ("--max-num-seqs",)),
        ):
            if pin in seen:
                continue
            given = flag(args, *names)
            if given is None:
                then = {
                    "revision": "the server loads the default branch, or local weights",
                    "quantization": "vLLM then reads it from the model's own config",
                    "max_num_seqs": "vLLM then picks its default for the hardware",
                }[pin]
                why[pin] = (
                    f"{self.name} does not report it and the launch sets no {names[0]} ({then})"
                )
            else:
                seen[pin] = Seen(given, f"launch flag {names[0]}", "launch")
        if "kv_dtype" not in seen:
            kv = flag(args, "--kv-cache-dtype") or "auto"
            seen["kv_dtype"] = Seen(kv, "launch flag --kv-cache-dtype", "launch")
            why.pop("kv_dtype", None)
        if "parallelism" not in seen:
            seen["parallelism"] = Seen(
                {
                    "tensor": _int(flag(args, "--tensor-parallel-size", "-tp"), 1),
                    "pipeline": _int(flag(args, "--pipeline-parallel-size", "-pp"), 1),
                    "data": _int(flag(args, "--data-parallel-size", "-dp"), 1),
                    "decode_context": _int(flag(args, "--decode-context-parallel-size", "-dcp"), 1),
                    "expert": "--enable-expert-parallel" in args or "-ep" in args,
                },
                "launch flags -tp/-pp/-dp/-dcp/--enable-expert-parallel",
                "launch",
            )
        launched = self._spec(args)
        reported = seen.get("speculation")
        if reported is None:
            seen["speculation"] = Seen(launched, "launch flag --speculative-config", "launch")
            why.pop("speculation", None)
        elif reported.value.get("method") == "unknown":
            # The server proved the draft length; the method is the launch's word for it.
            value: dict[str, Any] = dict(reported.value)
            value.pop("why", None)
            value["method"] = launched.get("method")
            value["draft_model"] = launched.get("draft_model")
            if launched.get("draft_tokens") not in (None, value["draft_tokens"]):
                value["launched_draft_tokens"] = launched.get("draft_tokens")
            seen["speculation"] = Seen(
                value,
                f"{reported.source} (draft tokens); launch flag --speculative-config (method)",
                "server+launch",
            )

    def _spec(self, args: list[str]) -> dict[str, Any]:
        raw = flag(args, "--speculative-config", "-sc")
        try:
            conf = json.loads(raw) if raw else {}
        except ValueError:
            return {"method": "unreadable", "draft_tokens": None, "why": f"not JSON: {raw!r}"}
        conf = {str(k).replace("-", "_"): v for k, v in (conf or {}).items()}
        method = flag(args, "--spec-method") or conf.get("method")
        tokens = _int(flag(args, "--spec-tokens")) or conf.get("num_speculative_tokens")
        model = flag(args, "--spec-model") or conf.get("model")
        if not method:
            return {"method": "none", "draft_tokens": 0}
        out = {"method": method, "draft_tokens": tokens, "draft_model": model}
        if tokens is None:
            out["why"] = "num_speculative_tokens not set: vLLM takes the draft's own block size"
        return out

    def same(self, pin: str, pinned: Any, seen: Any) -> Match:
        if pin == "quantization":
            return _same_quant(str(pinned), seen)
        if pin == "speculation" and dict(seen or {}).get("method") == "unknown":
            p, s = dict(pinned or {}), dict(seen or {})
            if self.method(str(p.get("method", "none"))) == "none":
                return False, f"the server drafts {s.get('draft_tokens')} tokens"
            if s.get("draft_tokens") != p.get("draft_tokens"):
                return False, f"the server drafts {s.get('draft_tokens')} tokens"
            return None, (
                f"the server drafts {s.get('draft_tokens')} tokens, as pinned, but reports no "
                "method"
            )
        if pin == "revision" and seen is None:
            return None, "the server names no revision (local weights, or the default branch)"
        return super().same(pin, pinned, seen)

    def _same_kv(self, pinned: str, seen: str) -> Match:
        p, s = pinned.strip().lower(), seen.strip().lower()
        if s == "auto" and p != "auto":
            return None, "--kv-cache-dtype auto follows the model's dtype, which is not reported"
        fp8 = {"fp8", "fp8_e4m3"}
        return p == s or (p in fp8 and s in fp8), ""

    def method(self, name: str) -> str:
        n = name.strip().lower()
        return self._METHOD_ALIASES.get(n, n)


_UNQUANTIZED = {"none", "bf16", "bfloat16", "fp16", "float16", "fp32", "float32", "auto"}


def _same_quant(pinned: str, seen: Any) -> Match:
    """A quantization pin against the config's `quantization` (None: unquantized weights).
    The pin's first word is compared, so `none (GGUF dequantized to bf16)` means none."""
    words = pinned.strip().lower().replace("(", " ").split()
    p = words[0] if words else ""
    if seen is None or str(seen).lower() in ("none", ""):
        return p in _UNQUANTIZED, "the server runs unquantized weights (quantization None)"
    return p == str(seen).strip().lower(), ""


def fingerprint(body: Any) -> tuple[str, str] | None:
    """`system_fingerprint` `vllm-<version>-<hash>` of a completion: the version and the hash
    of the serving config (the same recipe gives the same hash)."""
    fp = body.get("system_fingerprint") if isinstance(body, dict) else None
    m = re.fullmatch(r"vllm-(.+)-([0-9a-f]{6,})", str(fp or ""))
    return (m.group(1), m.group(2)) if m else None


def server_config(body: Any) -> dict[str, Any]:
    """The resolved config of `GET /server_info` (dev mode), as sections of dicts: the JSON
    form (`config_format=json`), or the text form read for the fields identity needs."""
    if not isinstance(body, dict):
        return {}
    conf = body.get("vllm_config")
    if isinstance(conf, dict):
        return conf
    if not isinstance(conf, str):
        return {}

    def value(key: str) -> Any:
        m = re.search(rf"\b{key}=([^,)]+)", str(conf))
        if m is None:
            return "missing"
        v = m.group(1).strip().strip("'\"")
        return None if v == "None" else (int(v) if v.isdigit() else v)

    out: dict[str, Any] = {"model_config": {}, "cache_config": {}, "parallel_config": {}}
    for sec, key, name in (
        ("model_config", "revision", "revision"),
        ("model_config", "quantization", "quantization"),
        ("cache_config", "cache_dtype", "kv_cache_dtype"),
        ("parallel_config", "tensor_parallel_size", "tensor_parallel_size"),
        ("parallel_config", "pipeline_parallel_size", "pipeline_parallel_size"),
        ("parallel_config", "data_parallel_size", "data_parallel_size"),
    ):
        v = value(name)
        if v != "missing":
            out[sec][key] = v
    spec = re.search(r"speculative_config=(None|SpeculativeConfig\(([^)]*)\))", conf)
    if spec is not None:
        inner = spec.group(2) or ""
        method = re.search(r"method='?([\w-]+)", inner)
        k = re.search(r"num_spec(?:ulative)?_tokens=(\d+)", inner)
        out["speculative_config"] = (
            {"method": method.group(1), "num_speculative_tokens": int(k.group(1)) if k else None}
            if method
            else None
        )
    return out


def _snapshot(text: Any) -> MetricsSnapshot | None:
    if not isinstance(text, str) or not text.strip():
        return None
    try:
        return MetricsSnapshot.parse(text)
    except ValueError:
        return None


class Sglang(Vllm):
    """SGLang: `/server_info` returns the resolved server arguments; launch flags otherwise."""

    name, owned_by, paths = "sglang", "sglang", ("/server_info",)
    text_paths = ()
    probe_chat = False
    metrics = SGLANG
    reasoning_fields = ("reasoning_content",)
    error_shape = "flat"
    _length_errors = _SGLANG_LENGTH
    kv_report = "pool-gauge"
    kv_log = (
        ("kv_tokens", r"max_total_num_tokens=(\d+)"),
        ("k_size_gb", r"K size: ([\d.]+) GB"),
        ("v_size_gb", r"V size: ([\d.]+) GB"),
    )
    kv_note = "max_total_num_tokens is the KV pool size in tokens"
    _ARGS: ClassVar[dict[str, str]] = {
        "revision": "revision",
        "quantization": "quantization",
        "kv_dtype": "kv_cache_dtype",
        "max_num_seqs": "max_running_requests",
    }

    def _observe(
        self,
        bodies: dict[str, Any],
        launch: Launch | None,
        models: list[dict[str, Any]],
        seen: dict[str, Seen],
        why: dict[str, str],
    ) -> None:
        raw = bodies.get("/server_info")
        info: dict[str, Any] = raw if isinstance(raw, dict) else {}
        _context_from_models(models, seen)
        if info.get("version"):
            seen["engine_build"] = Seen(info["version"], "GET /server_info version")
        for pin, key in self._ARGS.items():
            if info.get(key) is not None:
                seen[pin] = Seen(info[key], f"GET /server_info {key}")
            else:
                why[pin] = f"GET /server_info has no {key}"
        if "tp_size" in info:
            seen["parallelism"] = Seen(
                {
                    "tensor": info.get("tp_size", 1),
                    "pipeline": info.get("pp_size", 1),
                    "data": info.get("dp_size", 1),
                    "decode_context": info.get("dcp_size", 1),
                    "expert": (info.get("ep_size") or 1) > 1,
                },
                "GET /server_info tp_size/pp_size/dp_size/ep_size (dcp_size, 1 when absent)",
            )
        else:
            why["parallelism"] = "GET /server_info has no tp_size"
        algo = info.get("speculative_algorithm")
        if "speculative_algorithm" in info:
            # speculative_num_draft_tokens counts the verified token too (SGLang's accept rate
            # divides by num_draft_tokens - 1): the drafted tokens per step are one fewer.
            width = info.get("speculative_num_draft_tokens")
            seen["speculation"] = Seen(
                {
                    "method": algo or "none",
                    "draft_tokens": (width - 1 if isinstance(width, int) else None) if algo else 0,
                    "draft_model": info.get("speculative_draft_model_path"),
                },
                "GET /server_info speculative_num_draft_tokens - 1 (the verified token)",
            )
        else:
            why["speculation"] = "GET /server_info has no speculative_algorithm"

    def method(self, name: str) -> str:
        n = name.strip().lower()
        return {"nextn": "eagle", "mtp": "eagle"}.get(n, n)


ADAPTERS: dict[str, EngineAdapter] = {a.name: a for a in (LlamaCpp(), Vllm(), Sglang())}


def adapter(engine: str) -> EngineAdapter:
    """The identity adapter of an engine (`llama.cpp`, `vllm`, `sglang`)."""
    return ADAPTERS[engine]
