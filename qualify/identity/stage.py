"""Identity: the candidate's pins against what the server says about itself."""

from __future__ import annotations

from typing import Any

from qualify.candidate import Identity
from qualify.httpclient.client import Client
from qualify.records import AttemptRecord, GateResult, StageResult, Verdict
from qualify.stage import StageContext, finish, stage


def _reported_llamacpp(models: Any, props: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    data = (models or {}).get("data") or []
    out["model"] = [m.get("id") for m in data] + [a for m in data for a in m.get("aliases") or []]
    if isinstance(props, dict):
        slots = props.get("total_slots")
        n_ctx = (props.get("default_generation_settings") or {}).get("n_ctx")
        if isinstance(n_ctx, int):
            out["context_length"] = n_ctx * (slots if isinstance(slots, int) else 1)
        out["engine_build"] = props.get("build_info")
        out["quantization"] = props.get("model_ftype")
        out["max_num_seqs"] = slots
    return out


def _reported_openai(models: Any, info: Any) -> dict[str, Any]:
    data = (models or {}).get("data") or []
    out: dict[str, Any] = {"model": [m.get("id") for m in data]}
    lens = [m.get("max_model_len") for m in data if m.get("max_model_len")]
    if lens:
        out["context_length"] = lens[0]
    if isinstance(info, dict) and info.get("version"):
        out["engine_build"] = info["version"]
    return out


def compare(pins: Identity, reported: dict[str, Any]) -> list[GateResult]:
    """One gate per pin the server reports; a mismatch fails and shows both values."""
    gates = []
    for name in ("model", "context_length", "engine_build", "quantization", "max_num_seqs"):
        pinned = getattr(pins, name)
        got = reported.get(name)
        if got is None or got == []:
            continue
        if isinstance(got, list):
            ok = pinned in got
            shown = got[0] if len(got) == 1 else got
        else:
            ok = str(got).lower() == str(pinned).lower()
            shown = got
        why = [] if ok else [f"pinned {name} {pinned!r}, server reports {shown!r}"]
        gates.append(
            GateResult(
                gate=name,
                stage="identity",
                critical=True,
                verdict=Verdict.PASS if ok else Verdict.FAIL,
                reasons=why,
                attempts=[AttemptRecord(number=1, verdict=Verdict.PASS if ok else Verdict.FAIL)],
                metrics={"pinned": pinned, "reported": shown},
            )
        )
    return gates


async def _get(ctx: StageContext, client: Client, path: str) -> Any:
    ex = await client.get(path)
    ctx.keep(path.strip("/").replace("/", "-") or "root", ex)
    return ex.body if ex.ok else None


@stage("identity")
async def identity(ctx: StageContext) -> StageResult:
    """Pass when every pin the server reports matches; fail, showing both values, otherwise."""
    pins = ctx.candidate.identity
    client = await ctx.client()
    models_ex = await client.get("/v1/models")
    ctx.keep("v1-models", models_ex)
    if not models_ex.ok:
        why = models_ex.error or f"HTTP {models_ex.status}"
        gate = GateResult(
            gate="reachable",
            stage="identity",
            critical=True,
            verdict=Verdict.ERROR,
            reasons=[f"GET /v1/models failed: {why}"],
        )
        return finish(ctx, [gate])
    if pins.engine == "llama.cpp":
        reported = _reported_llamacpp(models_ex.body, await _get(ctx, client, "/props"))
    elif pins.engine == "vllm":
        reported = _reported_openai(models_ex.body, await _get(ctx, client, "/version"))
    else:
        reported = _reported_openai(models_ex.body, await _get(ctx, client, "/server_info"))
    gates = compare(pins, reported)
    unreported = sorted(
        {"revision", "image_digest", "kv_dtype", "parallelism", "speculation"}
        | (
            {"model", "context_length", "engine_build", "quantization", "max_num_seqs"}
            - {g.gate for g in gates}
        )
    )
    data = {
        "pins": pins.model_dump(mode="json"),
        "reported": reported,
        "not_reported": unreported,
        "launches": ctx.lanes.launches,
    }
    return finish(ctx, gates, data)
