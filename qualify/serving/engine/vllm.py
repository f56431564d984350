"""vLLM: its reports (`/version`, `/metrics`, `/server_info` in dev mode, the fingerprint of a
completion), its launch flags, and how it words an over-length request."""

from __future__ import annotations

import json
import re
from typing import Any, ClassVar

from qualify.httpclient.chat import Quirks
from qualify.serving.dialects import VLLM, MetricsSnapshot, read_page
from qualify.serving.identity import (
    PARALLEL,
    EngineAdapter,
    Match,
    Observed,
    Seen,
    context_from_models,
    flag,
    to_int,
)

# (kind, pattern with named groups `limit` and `prompt`), as vLLM words it.
LENGTH_ERRORS: tuple[tuple[str, str], ...] = (
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
    quirks = Quirks(
        reasoning_fields=("reasoning", "reasoning_content"), length_errors=LENGTH_ERRORS
    )
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
    aliases: ClassVar[dict[str, str]] = dict.fromkeys(
        ("deepseek_mtp", "ernie_mtp", "qwen3_next_mtp"), "mtp"
    )

    def _observe(self, o: Observed) -> None:
        bodies, launch, models, seen, why = o.bodies, o.launch, o.models, o.seen, o.why
        version = bodies.get("/version")
        fp = fingerprint(bodies.get(CHAT_PROBE))
        if isinstance(version, dict) and version.get("version"):
            src = "GET /version"
            if fp and fp[0] != str(version["version"]):
                src += f" (system_fingerprint says {fp[0]!r})"
            seen["engine_build"] = Seen(version["version"], src)
        elif fp:
            seen["engine_build"] = Seen(fp[0], "system_fingerprint of a completion")
        context_from_models(models, seen)
        self._from_config(server_config(bodies.get(SERVER_INFO)), seen)
        self._from_metrics(read_page(bodies.get("/metrics")), seen, why)
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

    def _from_config(self, config: dict[str, Any], seen: dict[str, Seen]) -> None:  # raw JSON
        """Pins from `/server_info` (dev mode): the resolved config, JSON or its text form."""
        src = "GET /server_info vllm_config"
        model = config.get("model_config") or {}
        for pin in ("revision", "quantization"):
            if pin in model:
                seen[pin] = Seen(model[pin], f"{src} model_config.{pin}")
        cache = config.get("cache_config") or {}
        if cache.get("cache_dtype"):
            seen["kv_dtype"] = Seen(cache["cache_dtype"], f"{src} cache_config.cache_dtype")
        par = config.get("parallel_config") or {}
        if "tensor_parallel_size" in par:
            sizes = [par.get(f"{k}_parallel_size", 1) for k in PARALLEL[:4]]
            expert = bool(par.get("enable_expert_parallel", False))
            seen["parallelism"] = Seen(
                dict(zip(PARALLEL, [*sizes, expert], strict=True)), f"{src} parallel_config"
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
        """The pins the server did not report, from qualify's own argv (what was asked for)."""
        for pin, names, then in (
            ("revision", ("--revision",), "the server loads the default branch, or local weights"),
            (
                "quantization",
                ("--quantization", "-q"),
                "vLLM then reads it from the model's own config",
            ),
            ("max_num_seqs", ("--max-num-seqs",), "vLLM then picks its default for the hardware"),
        ):
            if pin in seen:
                continue
            given = flag(args, *names)
            if given is None:
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
            sizes = [
                to_int(flag(args, f"--{k.replace('_', '-')}-parallel-size", f"-{short}"), 1)
                for k, short in zip(PARALLEL, ("tp", "pp", "dp", "dcp"), strict=False)
            ]
            expert = "--enable-expert-parallel" in args or "-ep" in args
            seen["parallelism"] = Seen(
                dict(zip(PARALLEL, [*sizes, expert], strict=True)),
                "launch flags -tp/-pp/-dp/-dcp/--enable-expert-parallel",
                "launch",
            )
        launched = self._spec(args)
        reported = seen.get("speculation")
        if reported is None:
            seen["speculation"] = Seen(launched, "launch flag --speculative-config", "launch")
            why.pop("speculation", None)
        elif isinstance(reported.value, dict) and reported.value.get("method") == "unknown":
            # The server proved the draft length; the method is the launch's word for it.
            value: dict[str, object] = {k: v for k, v in reported.value.items() if k != "why"}
            value["method"] = launched.get("method")
            value["draft_model"] = launched.get("draft_model")
            if launched.get("draft_tokens") not in (None, value["draft_tokens"]):
                value["launched_draft_tokens"] = launched.get("draft_tokens")
            seen["speculation"] = Seen(
                value,
                f"{reported.source} (draft tokens); launch flag --speculative-config (method)",
                "server+launch",
            )

    def _spec(self, args: list[str]) -> dict[str, object]:
        raw = flag(args, "--speculative-config", "-sc")
        try:
            conf = json.loads(raw) if raw else {}
        except ValueError:
            return {"method": "unreadable", "draft_tokens": None, "why": f"not JSON: {raw!r}"}
        conf = {str(k).replace("-", "_"): v for k, v in (conf or {}).items()}
        method = flag(args, "--spec-method") or conf.get("method")
        tokens = to_int(flag(args, "--spec-tokens")) or conf.get("num_speculative_tokens")
        model = flag(args, "--spec-model") or conf.get("model")
        if not method:
            return {"method": "none", "draft_tokens": 0}
        out = {"method": method, "draft_tokens": tokens, "draft_model": model}
        if tokens is None:
            out["why"] = "num_speculative_tokens not set: vLLM takes the draft's own block size"
        return out

    def same(self, pin: str, pinned: Any, seen: Any) -> Match:  # raw JSON values
        if pin == "quantization":
            return same_quant(str(pinned), seen)
        if pin == "speculation" and dict(seen or {}).get("method") == "unknown":
            p, s = dict(pinned or {}), dict(seen or {})
            off = self.method(str(p.get("method", "none"))) == "none"
            if off or s.get("draft_tokens") != p.get("draft_tokens"):
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


_UNQUANTIZED = {"none", "bf16", "bfloat16", "fp16", "float16", "fp32", "float32", "auto"}


def same_quant(pinned: str, seen: object) -> Match:
    """A quantization pin against the config's `quantization` (None: unquantized weights).
    The pin's first word is compared, so `none (GGUF dequantized to bf16)` means none."""
    words = pinned.strip().lower().replace("(", " ").split()
    p = words[0] if words else ""
    if seen is None or str(seen).lower() in ("none", ""):
        return p in _UNQUANTIZED, "the server runs unquantized weights (quantization None)"
    return p == str(seen).strip().lower(), ""


def fingerprint(body: object) -> tuple[str, str] | None:
    """`system_fingerprint` `vllm-<version>-<hash>` of a completion: the version and the hash
    of the serving config (the same recipe gives the same hash)."""
    fp = body.get("system_fingerprint") if isinstance(body, dict) else None
    m = re.fullmatch(r"vllm-(.+)-([0-9a-f]{6,})", str(fp or ""))
    return (m.group(1), m.group(2)) if m else None


def server_config(body: object) -> dict[str, Any]:  # the config's JSON, raw
    """The resolved config of `GET /server_info` (dev mode), as sections of dicts: the JSON
    form (`config_format=json`), or the text form read for the fields identity needs."""
    if not isinstance(body, dict):
        return {}
    conf = body.get("vllm_config")
    if isinstance(conf, dict):
        return conf
    if not isinstance(conf, str):
        return {}
    out: dict[str, Any] = {"model_config": {}, "cache_config": {}, "parallel_config": {}}  # raw
    for sec, key, name in (
        ("model_config", "revision", "revision"),
        ("model_config", "quantization", "quantization"),
        ("cache_config", "cache_dtype", "kv_cache_dtype"),
        ("parallel_config", "tensor_parallel_size", "tensor_parallel_size"),
        ("parallel_config", "pipeline_parallel_size", "pipeline_parallel_size"),
        ("parallel_config", "data_parallel_size", "data_parallel_size"),
    ):
        if m := re.search(rf"\b{name}=([^,)]+)", conf):
            v = m.group(1).strip().strip("'\"")
            out[sec][key] = None if v == "None" else (int(v) if v.isdigit() else v)
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
