"""The KV capacity or memory a lane reports: gauges where the engine has them, else its log.

- vLLM: `vllm:kv_cache_usage_perc` (a fraction, prefix-cache blocks count as used) and the
  startup line `GPU KV cache size: N tokens`.
- SGLang: the gauge `sglang:max_total_num_tokens` and `max_total_num_tokens=N` in its log.
- llama.cpp: no KV gauge on `/metrics` in this version; the startup log gives the slots and
  per-slot context (`n_ctx_slot`) and, at higher verbosity, `KV buffer size = X MiB`.
"""

from __future__ import annotations

import re
from pathlib import Path

from qualify.ab.record import Kv, KvLog
from qualify.serving.dialects import Dialect, MetricsSnapshot
from qualify.serving.engine import ADAPTERS, adapter

_LOG_LIMIT = 1 << 20


def read_server_log(attempt_dir: Path | None) -> str:
    """The server's stdout and stderr as captured so far (the first MiB of each part)."""
    if attempt_dir is None or not attempt_dir.is_dir():
        return ""
    parts = sorted(attempt_dir.glob("stdout.*.log")) + sorted(attempt_dir.glob("stderr.*.log"))
    return "".join(p.read_bytes()[:_LOG_LIMIT].decode("utf-8", "replace") for p in parts)


def _number(text: str) -> float | int:
    value = float(text.replace(",", ""))
    return int(value) if value.is_integer() else value


def from_log(text: str, engine: str) -> dict[str, int | float]:
    """Figures from the startup log; a figure printed once per buffer (llama.cpp) is summed."""
    out: dict[str, int | float] = {}
    for key, pattern in adapter(engine).kv_log if engine in ADAPTERS else ():
        if values := [_number(h) for h in re.findall(pattern, text)]:
            out[key] = sum(values) if key == "kv_buffer_mib" else values[-1]
    return out


def lane_kv(engine: str, d: Dialect, snap: MetricsSnapshot | None, log: str) -> Kv:
    """What one lane reports about its KV cache; empty figures are left out, never zero."""
    gauges = {n: v for n in d.kv_capacity if snap and (v := d.read(snap, n)) is not None}
    logged = from_log(log, engine)
    return Kv(
        gauges=gauges,
        log=KvLog(**logged),
        reported=bool(gauges or logged),
        note=adapter(engine).kv_note if engine in ADAPTERS else "",
    )
