"""Where each engine keeps its numbers: metric names, idle gauges, identity endpoints.

Names checked against the engines' sources (see docs/engines.md): vLLM 0.33, SGLang 0.5.23 and
the llama.cpp bundled with llama-cpp-python 0.3.36.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families


@dataclass(frozen=True)
class Dialect:
    name: str
    running: tuple[str, ...]
    waiting: tuple[str, ...]
    spec_drafts: str | None
    spec_draft_tokens: str | None
    spec_accepted: str | None
    spec_per_pos: str | None
    spec_gauges: tuple[str, ...] = ()
    prompt_cached: tuple[str, ...] = ()
    kv_capacity: tuple[str, ...] = ()
    info_paths: tuple[str, ...] = field(default_factory=tuple)


VLLM = Dialect(
    name="vllm",
    running=("vllm:num_requests_running",),
    waiting=("vllm:num_requests_waiting",),
    spec_drafts="vllm:spec_decode_num_drafts_total",
    spec_draft_tokens="vllm:spec_decode_num_draft_tokens_total",
    spec_accepted="vllm:spec_decode_num_accepted_tokens_total",
    spec_per_pos="vllm:spec_decode_num_accepted_tokens_per_pos_total",
    prompt_cached=("vllm:prompt_tokens_cached_total", "vllm:prefix_cache_hits_total"),
    kv_capacity=("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
    info_paths=("/version",),
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
    prompt_cached=("sglang:cached_tokens_total",),
    kv_capacity=("sglang:max_total_num_tokens", "sglang:token_usage"),
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
    prompt_cached=("llamacpp:prompt_tokens_cached_total",),
    info_paths=("/props",),
)
DIALECTS = {d.name: d for d in (VLLM, SGLANG, LLAMACPP)}


def dialect(engine: str) -> Dialect:
    return DIALECTS[engine]


Labels = tuple[tuple[str, str], ...]


@dataclass
class MetricsSnapshot:
    """One scrape of `/metrics`: every sample by name and sorted labels."""

    samples: dict[str, dict[Labels, float]]
    t: float = 0.0

    @classmethod
    def parse(cls, text: str, t: float = 0.0) -> MetricsSnapshot:
        samples: dict[str, dict[Labels, float]] = {}
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                labels = tuple(sorted(s.labels.items()))
                samples.setdefault(s.name, {})[labels] = float(s.value)
        return cls(samples, t)

    def has(self, name: str) -> bool:
        return name in self.samples

    def total(self, name: str) -> float | None:
        """Sum over every label set (e.g. over ranks), or None if the metric is absent."""
        series = self.samples.get(name)
        return None if series is None else sum(series.values())

    def first(self, names: tuple[str, ...]) -> float | None:
        for n in names:
            v = self.total(n)
            if v is not None:
                return v
        return None

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
