"""Where each engine keeps its numbers on `/metrics`: the series that mean requests running and
waiting, speculative decoding, generated and cached tokens, KV capacity and latency histograms,
and one scrape read with prometheus_client's text parser.

Names checked against the engines' sources (see docs/engines.md): vLLM 0.33, SGLang 0.5.23 and
the llama.cpp bundled with llama-cpp-python 0.3.36.
"""

from __future__ import annotations

from dataclasses import dataclass

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
    spec_drafts: str | None = None
    spec_draft_tokens: str | None = None
    spec_accepted: str | None = None
    spec_per_pos: str | None = None
    spec_gauges: tuple[str, ...] = ()  # last-batch values, never a delta
    spec_verify_calls: str | None = None  # one verify call per draft (SGLang)
    spec_width: str | None = None  # draft tokens per verify call, the verified one included
    spec_missing: str = "spec-counters-absent"  # the inconclusive's name when none is exposed
    generated: tuple[str, ...] = ()
    prompt_cached: tuple[str, ...] = ()
    kv_capacity: tuple[str, ...] = ()
    means: frozenset[str] = frozenset()
    # Latency histograms the server keeps (key -> family name without _sum/_count): decode,
    # generation_tokens, ttft, prefill, queue, itl; or, without decode, e2e and itl_tokens
    # (an ITL histogram counting tokens, SGLang's) (`qualify.serving.histograms`).
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
    histograms=(
        ("decode", "vllm:request_decode_time_seconds"),
        ("e2e", "vllm:e2e_request_latency_seconds"),
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
    spec_gauges=("sglang:spec_accept_length", "sglang:spec_accept_rate"),
    spec_verify_calls="sglang:spec_verify_calls_total",
    spec_width="sglang:spec_num_draft_tokens",
    spec_missing="spec-gauges-absent",
    generated=("sglang:generation_tokens_total",),
    prompt_cached=("sglang:cached_tokens_total",),
    kv_capacity=("sglang:max_total_num_tokens", "sglang:token_usage"),
    histograms=(
        ("e2e", "sglang:e2e_request_latency_seconds"),
        ("itl_tokens", "sglang:inter_token_latency_seconds"),
        ("generation_tokens", "sglang:generation_tokens_histogram"),
        ("ttft", "sglang:time_to_first_token_seconds"),
        ("queue", "sglang:queue_time_seconds"),
    ),
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
        """The first label set of an info series (`vllm:cache_config_info`, value 1)."""
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


def read_page(text: object) -> MetricsSnapshot | None:
    """A `/metrics` page as kept in a report, or None when there is no readable page."""
    if not isinstance(text, str) or not text.strip():
        return None
    try:
        return MetricsSnapshot.parse(text)
    except ValueError:
        return None
