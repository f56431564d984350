"""The names other modules still import from here, while they move to their homes: metric
dialects (`qualify.serving.dialects`), identity (`qualify.serving.identity`), and one adapter
per engine (`qualify.serving.engine`, `adapter(engine)` the one way in). New code imports from
those."""

from __future__ import annotations

from qualify.httpclient.chat import REASONING_FIELDS
from qualify.serving.dialects import (
    DIALECTS,
    LLAMACPP,
    SGLANG,
    VLLM,
    Dialect,
    MetricsSnapshot,
    busy,
    dialect,
)
from qualify.serving.engine import ADAPTERS, adapter
from qualify.serving.engine.llamacpp import llamacpp_quant_names
from qualify.serving.engine.vllm import CHAT_PROBE, SERVER_INFO, fingerprint, server_config
from qualify.serving.identity import PINS, Launch, Match, Seen, flag

__all__ = [
    "ADAPTERS",
    "CHAT_PROBE",
    "DIALECTS",
    "LLAMACPP",
    "PINS",
    "REASONING_FIELDS",
    "SERVER_INFO",
    "SGLANG",
    "VLLM",
    "Dialect",
    "Launch",
    "Match",
    "MetricsSnapshot",
    "Seen",
    "adapter",
    "busy",
    "dialect",
    "fingerprint",
    "flag",
    "llamacpp_quant_names",
    "server_config",
]
