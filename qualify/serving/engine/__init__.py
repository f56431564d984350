"""One adapter per engine (`llama.cpp`, `vllm`, `sglang`), each in its own module: what the
server reports about itself (`qualify.serving.identity`), its metric names
(`qualify.serving.dialects`), its request quirks and error wording (`Quirks`, handed to the
HTTP client as data). `adapter(engine)` is the one way in."""

from __future__ import annotations

from qualify.serving.engine.llamacpp import LlamaCpp
from qualify.serving.engine.sglang import Sglang
from qualify.serving.engine.vllm import Vllm
from qualify.serving.identity import EngineAdapter

ADAPTERS: dict[str, EngineAdapter] = {a.name: a for a in (LlamaCpp(), Vllm(), Sglang())}


def adapter(engine: str) -> EngineAdapter:
    """The adapter of an engine (`llama.cpp`, `vllm`, `sglang`)."""
    return ADAPTERS[engine]


__all__ = ["ADAPTERS", "EngineAdapter", "adapter"]
