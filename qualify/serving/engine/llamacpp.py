"""llama.cpp's llama-server: its reports (`/props`, `/slots`), its launch flags, its file types,
and how it words an over-length request."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from qualify.httpclient.chat import Quirks
from qualify.serving.dialects import LLAMACPP
from qualify.serving.identity import HEX, EngineAdapter, Match, Observed, Seen, flag, to_int

# (kind, pattern with named groups `limit` and `prompt`), as llama-server words it.
LENGTH_ERRORS: tuple[tuple[str, str], ...] = (
    (
        "over-length",
        r"request \((?P<prompt>\d+) tokens\) exceeds the available context size "
        r"\((?P<limit>\d+) tokens\)",
    ),
)

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
    quirks = Quirks(
        reasoning_fields=("reasoning_content",),
        length_errors=LENGTH_ERRORS,
        # llama-server also states the window and prompt as `n_ctx`, `n_prompt_tokens`.
        window_fields=("n_ctx", "n_prompt_tokens"),
    )
    kv_report = "slots"
    kv_log = (
        ("n_slots", r"n_slots = (\d+)"),
        ("n_ctx_slot", r"n_ctx_slot = (\d+)"),
        ("kv_buffer_mib", r"KV buffer size\s*=\s*([\d.]+) MiB"),
    )
    kv_note = "llama.cpp exposes no KV gauge on /metrics; figures come from the startup log"

    def _observe(self, o: Observed) -> None:
        bodies, launch, models, seen, why = o.bodies, o.launch, o.models, o.seen, o.why
        props = bodies.get("/props")
        why["revision"] = "llama-server reports the model file (/props model_path), no revision"
        if not isinstance(props, dict):
            for pin in ("engine_build", "quantization", "context_length", "max_num_seqs"):
                why[pin] = "GET /props did not answer"
        else:
            dgs = props.get("default_generation_settings") or {}
            if props.get("build_info"):
                seen["engine_build"] = Seen(props["build_info"], "GET /props build_info")
            meta = (models or [{}])[0].get("meta")
            ftype = props.get("model_ftype") or (isinstance(meta, dict) and meta.get("ftype"))
            if ftype:
                seen["quantization"] = Seen(ftype, "GET /props model_ftype")
            if isinstance(dgs.get("n_ctx"), int):
                seen["context_length"] = Seen(
                    dgs["n_ctx"], "GET /props default_generation_settings.n_ctx (one slot)"
                )
            if isinstance(props.get("total_slots"), int):
                seen["max_num_seqs"] = Seen(props["total_slots"], "GET /props total_slots")
        if launch is None:
            self._attached(bodies, seen, why)
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
        drafts = _drafts(bodies)
        source = "launch flags --spec-*"
        if drafts:
            source += ", GET /slots speculative"
            if not any(drafts) and spec["method"] != "none":
                spec = {"method": "none", "draft_tokens": 0, "launched": spec["method"]}
            elif all(drafts) and spec["method"] == "none":
                spec = {"method": "unknown", "draft_tokens": None, "why": "slots draft"}
        seen["speculation"] = Seen(spec, source, "server+launch" if drafts else "launch")

    @staticmethod
    def _attached(bodies: Mapping[str, object], seen: dict[str, Seen], why: dict[str, str]) -> None:
        """Attached, the launch flags are not known; /slots still says whether any slot drafts
        (no slot drafting proves speculation off; drafting, the method is the flags' word)."""
        for pin in ("kv_dtype", "parallelism", "speculation"):
            why[pin] = "attached to a running server: its launch flags are not known"
        drafts = _drafts(bodies)
        if drafts and not any(drafts):
            seen["speculation"] = Seen(
                {"method": "none", "draft_tokens": 0}, "GET /slots speculative (no slot drafts)"
            )
            del why["speculation"]
        elif drafts:
            why["speculation"] += (
                "; GET /slots says the slots draft, but the method and draft length are launch "
                "flags"
            )

    def _spec(self, args: list[str], env: dict[str, str]) -> dict[str, str | int | None]:
        types = flag(args, "--spec-type") or env.get("LLAMA_ARG_SPEC_TYPE")
        if types is None and "--spec-default" in args:
            types = "ngram-mod"
        method = types or "none"
        out: dict[str, str | int | None] = {"method": method, "draft_tokens": None}
        if method == "none":
            return out
        if "," in method:
            out["why"] = f"several speculative types at once ({method}): no one draft length"
        elif method.startswith("draft-"):
            n = flag(args, "--spec-draft-n-max") or env.get("LLAMA_ARG_SPEC_DRAFT_N_MAX")
            out["draft_tokens"] = to_int(n, 3)
            out["draft_model"] = flag(args, "--spec-draft-model", "-md", "--model-draft")
        elif method == "ngram-mod":
            out["draft_tokens"] = to_int(flag(args, "--spec-ngram-mod-n-max"), 64)
        else:
            out["why"] = f"{method} drafts a length that no launch flag states"
        return out

    def same(self, pin: str, pinned: Any, seen: Any) -> Match:  # raw JSON values
        if pin == "quantization":
            names = llamacpp_quant_names(str(seen))
            p = str(pinned).strip().upper().replace("-", "_").replace(" ", "_")
            return p in names, f"llama.cpp file type {seen!r} is {' or '.join(names)}"
        if pin == "engine_build":
            return _llamacpp_build(str(pinned), str(seen))
        if pin == "parallelism":
            par: dict[str, Any] = dict(pinned or {})  # the pin, raw JSON
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


def _drafts(bodies: Mapping[str, object]) -> list[object]:
    """Per slot, whether it drafts (`GET /slots` `speculative`); empty without /slots."""
    slots = bodies.get("/slots")
    if not isinstance(slots, list):
        return []
    return [s.get("speculative") for s in slots if isinstance(s, dict)]


def _llamacpp_build(pinned: str, reported: str) -> Match:
    """`b1234-0c1e570` against a pin of the same, of `b1234`, or of the commit."""
    p, r = pinned.strip().lower(), reported.strip().lower()
    number, _, sha = r.partition("-")
    if p in (r, number):
        return True, ""
    if HEX.match(p) and sha:
        return sha.startswith(p) or p.startswith(sha), f"commit {sha} from build {reported!r}"
    return False, ""
