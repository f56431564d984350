"""SGLang: `/server_info` returns the resolved server arguments; launch flags otherwise. Its
errors are flat (`{"object": "error", "message": ...}`)."""

from __future__ import annotations

from typing import Any, ClassVar

from qualify.httpclient.chat import Quirks
from qualify.serving.dialects import SGLANG
from qualify.serving.engine.vllm import Vllm
from qualify.serving.identity import PARALLEL, Observed, Seen, context_from_models

# (kind, pattern with named groups `limit` and `prompt`), as SGLang words it.
LENGTH_ERRORS: tuple[tuple[str, str], ...] = (
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


class Sglang(Vllm):
    """SGLang: `/server_info` returns the resolved server arguments; launch flags otherwise."""

    name, owned_by, paths = "sglang", "sglang", ("/server_info",)
    text_paths = ()
    probe_chat = False
    metrics = SGLANG
    quirks = Quirks(reasoning_fields=("reasoning_content",), length_errors=LENGTH_ERRORS)
    kv_report = "pool-gauge"
    kv_log = (
        ("kv_tokens", r"max_total_num_tokens=(\d+)"),
        ("k_size_gb", r"K size: ([\d.]+) GB"),
        ("v_size_gb", r"V size: ([\d.]+) GB"),
    )
    kv_note = "max_total_num_tokens is the KV pool size in tokens"
    aliases: ClassVar[dict[str, str]] = {"nextn": "eagle", "mtp": "eagle"}
    _ARGS: ClassVar[dict[str, str]] = {
        "revision": "revision",
        "quantization": "quantization",
        "kv_dtype": "kv_cache_dtype",
        "max_num_seqs": "max_running_requests",
    }

    def _observe(self, o: Observed) -> None:
        bodies, models, seen, why = o.bodies, o.models, o.seen, o.why
        raw = bodies.get("/server_info")
        info: dict[str, Any] = raw if isinstance(raw, dict) else {}  # raw server JSON
        context_from_models(models, seen)
        if info.get("version"):
            seen["engine_build"] = Seen(info["version"], "GET /server_info version")
        for pin, key in self._ARGS.items():
            if info.get(key) is not None:
                seen[pin] = Seen(info[key], f"GET /server_info {key}")
            else:
                why[pin] = f"GET /server_info has no {key}"
        if "tp_size" in info:
            sizes = [info.get(f"{k}_size", 1) for k in ("tp", "pp", "dp", "dcp")]
            seen["parallelism"] = Seen(
                dict(zip(PARALLEL, [*sizes, (info.get("ep_size") or 1) > 1], strict=True)),
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
