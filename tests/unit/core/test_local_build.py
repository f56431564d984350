"""The local server build: an explicit CPU variant, and nothing cached without a smoke decode.

The compiler is not run here: `_compile` is replaced by a stand-in that returns a stub binary
(a script that crashes as the AMX build did, or one that serves like llama-server), so what is
tested is the check and the cache, on any CPU.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from qualify.serving import local

# What an Intel Xeon with AVX-512 and AMX reports (the CPU the native build crashed on).
XEON_AMX = frozenset(
    [
        "sse4_2",
        "avx",
        "avx2",
        "fma",
        "f16c",
        "bmi2",
        "avx512f",
        "avx512bw",
        "avx512vl",
        "avx512_vnni",
        "amx_tile",
        "amx_int8",
        "amx_bf16",
    ]
)
OLD_X86 = frozenset(["sse", "sse2", "ssse3", "sse4_1", "sse4_2", "popcnt"])

SEGV = """#!{py}
import os, signal, sys
print("load_tensors: AMX model buffer size = 10.00 MiB", file=sys.stderr, flush=True)
print("init: llama threadpool init, n_threads = 2", file=sys.stderr, flush=True)
os.kill(os.getpid(), signal.SIGSEGV)
"""

# Answers /health and /completion as llama-server does (the fields the smoke decode reads).
SERVES = """#!{py}
import json, sys
from http.server import BaseHTTPRequestHandler, HTTPServer
port = int(sys.argv[sys.argv.index("--port") + 1])
class H(BaseHTTPRequestHandler):
    def _send(self, body):
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
    def do_GET(self):
        self._send({{"status": "ok"}})
    def do_POST(self):
        self._send({{"content": " Paris.", "tokens_predicted": 3,
                    "timings": {{"predicted_per_second": 100.0}}}})
    def log_message(self, *a):
        pass
HTTPServer(("127.0.0.1", port), H).serve_forever()
"""


def _stub(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text.format(py=sys.executable))
    p.chmod(0o755)
    return p


def test_a_cpu_with_amx_gets_a_variant_without_avx512_or_amx(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(local.platform, "machine", lambda: "x86_64")
    assert local.candidate_variants(XEON_AMX) == ["x86-64-v3", "x86-64-v2"]
    flags = local.CPU_VARIANTS["x86-64-v3"][1]
    assert "-DGGML_NATIVE=OFF" in flags
    for off in ("AVX512", "AMX_TILE", "AMX_INT8", "AMX_BF16"):
        assert f"-DGGML_{off}=OFF" in flags
    assert not any(f.endswith("=ON") and ("AVX512" in f or "AMX" in f) for f in flags)


def test_a_cpu_without_avx2_gets_the_sse42_variant(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local.platform, "machine", lambda: "x86_64")
    assert local.candidate_variants(OLD_X86) == ["x86-64-v2"]
    assert "-DGGML_AVX2=OFF" in local.CPU_VARIANTS["x86-64-v2"][1]


def test_the_smoke_decode_names_the_signal_and_quotes_the_log(tmp_path: Path) -> None:
    got = local.smoke_decode(_stub(tmp_path, "segv", SEGV), tmp_path / "m.gguf", tmp_path / "l")
    assert got["ok"] is False
    assert got["cause"] == "llama-server died of SIGSEGV during start-up"
    assert got["last_lines"][-1] == "init: llama threadpool init, n_threads = 2"


def _build_with(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, binaries: dict[str, Path]
) -> local.LocalPaths:
    monkeypatch.setenv("QUALIFY_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(local.platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(local, "cpu_flags", lambda: XEON_AMX)
    tree = tmp_path / "tree"
    (tree / "models" / "templates").mkdir(parents=True)
    monkeypatch.setattr(local, "_source_tree", lambda: tree)
    paths = local.LocalPaths("cpu")
    paths.model.parent.mkdir(parents=True)
    paths.model.write_bytes(b"GGUF")
    built: list[list[str]] = []

    def compile_stub(tree: Path, build: Path, flags: list[str], jobs: int | None) -> Path:
        built.append(flags)
        variant = next(v for v in local.CPU_VARIANTS if str(build).endswith(v))
        return binaries[variant]

    monkeypatch.setattr(local, "_compile", compile_stub)
    return paths


def test_a_binary_that_crashes_is_never_cached(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    segv = _stub(tmp_path, "segv", SEGV)
    paths = _build_with(monkeypatch, tmp_path, {"x86-64-v3": segv, "x86-64-v2": segv})
    with pytest.raises(local.BuildFailed, match="SIGSEGV") as exc:
        local.build_server(paths)
    assert "LLAMA_ARG_REPACK=0" in str(exc.value)
    assert not paths.binary.exists() and not paths.ready()


def test_the_next_variant_is_cached_when_the_best_one_crashes(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    binaries = {
        "x86-64-v3": _stub(tmp_path, "segv", SEGV),
        "x86-64-v2": _stub(tmp_path, "serves", SERVES),
    }
    paths = _build_with(monkeypatch, tmp_path, binaries)
    local.build_server(paths)
    assert paths.ready()
    rec = json.loads(paths.build_record.read_text())
    assert rec["variant"] == "x86-64-v2" and rec["smoke"]["ok"] and rec["smoke"]["tokens"] == 3
    assert rec["rejected"][0]["variant"] == "x86-64-v3"
    assert "SIGSEGV" in rec["rejected"][0]["cause"]


def test_a_cache_never_checked_or_for_another_cpu_is_not_used(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    paths = _build_with(monkeypatch, tmp_path, {"x86-64-v3": _stub(tmp_path, "s", SERVES)})
    local.build_server(paths)
    assert paths.unusable() is None
    monkeypatch.setattr(local, "cpu_flags", lambda: OLD_X86)
    assert "cannot run" in (paths.unusable() or "")
    paths.build_record.unlink()
    assert "never checked" in (paths.unusable() or "")
