"""Import check of the SGLang kit: versions, the modules the serve path loads, the serve flags.

Run with the kit's site first on PYTHONPATH (`scripts/gpu/sglang.sh importcheck` does). On a
machine without a GPU the CUDA-only steps are reported, not failed: `--no-gpu` says so.
Prints one JSON object; exit 1 when a module of the serve path or a serve flag is missing.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata as md
import json
import sys
import time
import traceback

# the modules `python -m sglang.launch_server` reaches for a Llama model with NGRAM speculation
SERVE_PATH = (
    "sglang.launch_server",
    "sglang.srt.server_args",
    "sglang.srt.entrypoints.http_server",
    "sglang.srt.entrypoints.engine",
    "sglang.srt.managers.tokenizer_manager",
    "sglang.srt.managers.scheduler",
    "sglang.srt.managers.detokenizer_manager",
    "sglang.srt.model_executor.model_runner",
    "sglang.srt.models.llama",
    "sglang.srt.speculative.ngram_worker",
    "sglang.srt.layers.attention.flashattention_backend",
    "sglang.srt.layers.attention.flashinfer_backend",
    "sglang.srt.layers.attention.triton_backend",
    "sglang.srt.layers.sampler",
    "sglang.srt.function_call.function_call_parser",
    "sglang.srt.parser.reasoning_parser",
    "sglang.srt.constrained.xgrammar_backend",
    "sglang.srt.observability.metrics_collector",
)
GPU_ONLY = ("sgl_kernel", "flashinfer", "sgl_kernel.flash_attn")
VERSIONS = (
    "sglang",
    "sglang-kernel",
    "flashinfer-python",
    "torch",
    "transformers",
    "tokenizers",
    "numpy",
    "numba",
    "xgrammar",
    "pydantic",
    "fastapi",
    "openai",
    "apache-tvm-ffi",
    "triton",
    "typing-extensions",
    "protobuf",
    "cuda-bindings",
    "timm",
    "gguf",
    "safetensors",
    "huggingface-hub",
)


def serve_argv(model: str, template: str, spec: bool) -> list[str]:
    argv = [
        "--model-path",
        model,
        "--served-model-name",
        "SmolLM2-135M-Instruct",
        "--host",
        "127.0.0.1",
        "--port",
        "30000",
        "--dtype",
        "bfloat16",
        "--context-length",
        "8192",
        "--max-running-requests",
        "8",
        "--mem-fraction-static",
        "0.25",
        "--chat-template",
        template,
        "--tool-call-parser",
        "qwen",
        "--reasoning-parser",
        "qwen3",
        "--enable-metrics",
        "--sampling-backend",
        "pytorch",
    ]
    if spec:
        argv += ["--speculative-algorithm", "NGRAM", "--speculative-num-draft-tokens", "6"]
    return argv


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--no-gpu", action="store_true")
    ap.add_argument("--model", default="/tmp/sgk/smollm2-hf")
    ap.add_argument("--template", default="/tmp/sgk/bundle/templates/Qwen-Qwen3-0.6B.jinja")
    a = ap.parse_args()
    r: dict = {"python": sys.version.split()[0], "sys.path[0:2]": sys.path[:2], "versions": {}}
    for name in VERSIONS:
        try:
            r["versions"][name] = md.version(name)
        except md.PackageNotFoundError:
            r["versions"][name] = None
    failed = []
    for mods, must in ((GPU_ONLY, not a.no_gpu), (SERVE_PATH, True)):
        for m in mods:
            t = time.time()
            try:
                mod = importlib.import_module(m)
                r[m] = f"ok {time.time() - t:.1f}s {getattr(mod, '__file__', '')}"
            except BaseException as e:
                r[m] = f"FAIL {type(e).__name__}: {e}"[:600]
                r[m + ":trace"] = traceback.format_exc()[-1500:]
                if must:
                    failed.append(m)
    # the serve flags exist in this build's parser, with the values the kit passes
    try:
        import argparse as _ap

        from sglang.srt.server_args import ServerArgs

        parser = _ap.ArgumentParser()
        ServerArgs.add_cli_args(parser)
        for spec in (True, False):
            ns = parser.parse_args(serve_argv(a.model, a.template, spec))
            r[f"flags_parse_spec_{spec}"] = {
                k: getattr(ns, k)
                for k in (
                    "speculative_algorithm",
                    "speculative_num_draft_tokens",
                    "context_length",
                    "max_running_requests",
                    "mem_fraction_static",
                    "tool_call_parser",
                    "reasoning_parser",
                    "sampling_backend",
                    "enable_metrics",
                    "attention_backend",
                )
            }
        r["ngram_flags"] = sorted(
            o for act in parser._actions for o in act.option_strings if "ngram" in o
        )
    except BaseException as e:
        r["flags_parse"] = f"FAIL {type(e).__name__}: {e}"[:600]
        r["flags_parse:trace"] = traceback.format_exc()[-1500:]
        failed.append("flags")
    r["failed"] = failed
    print(json.dumps(r, indent=1, default=str))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
