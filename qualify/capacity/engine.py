"""What the engine says it can hold: KV cache capacity in tokens, and how many requests of the
full context fit at once; the sources per engine: docs/capacity.md, "What the engine reports".
"""

from __future__ import annotations

from qualify.ab.kv import from_log
from qualify.capacity.record import Engine
from qualify.httpclient.client import Client
from qualify.httpclient.load import Keep
from qualify.serving.engine import ADAPTERS
from qualify.serving.idle import scrape


def _int(v: object) -> int | None:
    return int(v) if isinstance(v, int | float) and not isinstance(v, bool) and v > 0 else None


def _float(v: str | None) -> float | None:
    """A label's number ("1593200", "194.48"); None for "None", empty or not a positive number."""
    try:
        x = float(v) if v is not None else None
    except ValueError:
        return None
    return x if x is not None and x > 0 and x == x and x != float("inf") else None


def _find(obj: object, key: str) -> object:
    """The first value under `key` anywhere in a JSON document (SGLang nests its states)."""
    if isinstance(obj, dict):
        if key in obj:
            return obj[key]
        obj = list(obj.values())
    items = obj if isinstance(obj, list) else []
    return next((found for i in items if (found := _find(i, key)) is not None), None)


async def _get(client: Client, path: str, keep: Keep) -> object:
    ex = await client.get(path)
    keep(f"capacity-{path.strip('/').replace('/', '-')}", ex)
    return ex.body if ex.ok else None


async def _model_len(client: Client, keep: Keep) -> int | None:
    body = await _get(client, "/v1/models", keep)
    for m in (body or {}).get("data") or [] if isinstance(body, dict) else []:
        n = _int(m.get("max_model_len")) or _int((m.get("meta") or {}).get("n_ctx"))
        if n:
            return n
    return None


def _result(**kw: object) -> Engine:
    """Every figure written, None where the engine does not report it; `reported` said."""
    other = ("details", "note", "reported", "engine")
    figures = {k: None for k in Engine.model_fields if k not in other}
    out = Engine.model_validate({**figures, "details": {}, **kw})
    reported = out.kv_tokens is not None or out.max_concurrency_at_full_context is not None
    return out.model_copy(update={"reported": reported})


async def _llamacpp(client: Client, keep: Keep, log: str) -> Engine:
    props = await _get(client, "/props", keep)
    slots_body = await _get(client, "/slots", keep)
    props = props if isinstance(props, dict) else {}
    gen = props.get("default_generation_settings") or {}
    n_ctx = _int(gen.get("n_ctx")) if isinstance(gen, dict) else None
    slots = _int(props.get("total_slots"))
    source = "/props total_slots"
    if isinstance(slots_body, list) and slots_body:
        slots, source = len(slots_body), "/slots (entries)"
        n_ctx = n_ctx or _int(
            slots_body[0].get("n_ctx") if isinstance(slots_body[0], dict) else None
        )
    logged = from_log(log, "llama.cpp")
    slots = slots or _int(logged.get("n_slots"))
    n_ctx = n_ctx or _int(logged.get("n_ctx_slot"))
    return _result(
        kv_tokens=slots * n_ctx if slots and n_ctx else None,
        kv_tokens_source="slots × per-slot n_ctx" if slots and n_ctx else None,
        context_per_request=n_ctx,
        context_source="/props default_generation_settings.n_ctx (per slot)" if n_ctx else None,
        max_concurrency_at_full_context=float(slots) if slots else None,
        max_concurrency_source=f"{source}: one full-context request per slot" if slots else None,
        slots=slots,
        details={"log": logged},
    )


async def _vllm(client: Client, keep: Keep, log: str) -> Engine:
    logged = from_log(log, "vllm")
    model_len = await _model_len(client, keep)
    snap = await scrape(client)
    kv = _int(logged.get("kv_tokens"))
    kv_source = "startup log: GPU KV cache size" if kv else None
    conc = logged.get("max_concurrency")
    conc_source = "startup log: Maximum concurrency for … tokens per request" if conc else None
    # else `vllm:cache_config_info`'s labels, the only source on a server qualify attached to (no
    # startup log): vLLM 0.26 writes kv_cache_size_tokens and kv_cache_max_concurrency, earlier
    # builds only num_gpu_blocks and block_size (tokens = blocks x block size)
    info = snap.labels_of("vllm:cache_config_info") if snap else {}
    label = "GET /metrics vllm:cache_config_info"
    blocks, size = _int(_float(info.get("num_gpu_blocks"))), _int(_float(info.get("block_size")))
    if kv is None and (kv := _int(_float(info.get("kv_cache_size_tokens")))):
        kv_source = f"{label} kv_cache_size_tokens"
    if kv is None and blocks and size:
        kv, kv_source = blocks * size, f"{label} num_gpu_blocks x block_size"
    if conc is None and (conc := _float(info.get("kv_cache_max_concurrency"))) is not None:
        conc_source = f"{label} kv_cache_max_concurrency"
    if conc is None and kv and model_len:
        conc, conc_source = kv / model_len, "KV cache tokens / max_model_len"
    usage = snap.first(("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")) if snap else None
    return _result(
        kv_tokens=kv,
        kv_tokens_source=kv_source,
        context_per_request=model_len,
        context_source="/v1/models max_model_len" if model_len else None,
        max_concurrency_at_full_context=float(conc) if conc is not None else None,
        max_concurrency_source=conc_source,
        details={"log": logged, "kv_cache_usage_perc": usage},
    )


async def _sglang(client: Client, keep: Keep, log: str) -> Engine:
    snap = await scrape(client)
    kv = _int(snap.first(("sglang:max_total_num_tokens",))) if snap else None
    source = "gauge sglang:max_total_num_tokens" if kv else None
    info = await _get(client, "/server_info", keep)
    logged = from_log(log, "sglang")
    if kv is None and (kv := _int(_find(info, "max_total_num_tokens"))):
        source = "/server_info max_total_num_tokens"
    if kv is None and (kv := _int(logged.get("kv_tokens"))):
        source = "startup log: max_total_num_tokens"
    model_len = await _model_len(client, keep)
    conc = kv / model_len if kv and model_len else None
    return _result(
        kv_tokens=kv,
        kv_tokens_source=source,
        context_per_request=model_len,
        context_source="/v1/models max_model_len" if model_len else None,
        max_concurrency_at_full_context=conc,
        max_concurrency_source="KV pool / max_model_len" if conc else None,
        details={"log": logged, "max_running_requests": _find(info, "max_running_requests")},
    )


async def engine_capacity(engine: str, client: Client, keep: Keep, log: str) -> Engine:
    """The engine's own figures; a figure it does not report is None, never guessed."""
    how = ADAPTERS[engine].kv_report if engine in ADAPTERS else None
    read = {"slots": _llamacpp, "startup-log": _vllm, "pool-gauge": _sglang}.get(how or "")
    if read is None:
        return _result(note=f"no capacity source known for engine {engine!r}")
    out = await read(client, keep, log)
    return out.model_copy(update={"engine": engine})
