"""The SGLang device kit (scripts/gpu/sglang-kit.py, sglang.sh, docs/gpu/sglang/candidates): the
wheel rewrite keeps RECORD true, the lock is whole, and the candidates launch what sglang.sh
serves."""

from __future__ import annotations

import base64
import csv
import hashlib
import importlib.util
import io
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from qualify.candidate import load_candidate

ROOT = Path(__file__).resolve().parents[3]
GPU = ROOT / "scripts" / "gpu"
CANDS = ROOT / "docs" / "gpu" / "sglang" / "candidates"


def _kit():
    spec = importlib.util.spec_from_file_location("sglang_kit", GPU / "sglang-kit.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["sglang_kit"] = mod
    spec.loader.exec_module(mod)
    return mod


def _digest(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _wheel(path: Path, members: dict[str, bytes]) -> None:
    record = "demo-1.0.dist-info/RECORD"
    rows = [f"{n},{_digest(d)},{len(d)}" for n, d in members.items()] + [f"{record},,"]
    with zipfile.ZipFile(path, "w") as z:
        for n, d in members.items():
            z.writestr(n, d)
        z.writestr(record, "\n".join(rows) + "\n")


def test_rewrite_drops_and_patches_with_a_true_record(tmp_path: Path) -> None:
    kit = _kit()
    src, dst = tmp_path / "demo-1.0-py3-none-any.whl", tmp_path / "out.whl"
    _wheel(
        src,
        {
            "demo/a.h": b"#include <cstdint>\nint x;\n",
            "demo/sm100/big.so": b"\0" * 64,
            "demo/keep.py": b"print(1)\n",
            "demo-1.0.dist-info/METADATA": b"Name: demo\n",
        },
    )
    dropped, patched = kit.rewrite_wheel(
        src,
        dst,
        (re.compile(r"^demo/sm100/"),),
        store=True,
        patch={"demo/a.h": (b"#include <cstdint>\n", b"#include <cstddef>\n#include <cstdint>\n")},
    )
    assert dropped == ["demo/sm100/big.so"] and patched == ["demo/a.h"]
    with zipfile.ZipFile(dst) as z:
        assert all(i.compress_type == zipfile.ZIP_STORED for i in z.infolist())
        assert z.read("demo/a.h").startswith(b"#include <cstddef>\n")
        rows = list(csv.reader(io.StringIO(z.read("demo-1.0.dist-info/RECORD").decode())))
        names = {r[0] for r in rows}
        assert "demo/sm100/big.so" not in names and set(z.namelist()) == names
        for name, digest, size in rows:
            if digest:
                assert digest == _digest(z.read(name)) and int(size) == len(z.read(name))


def test_a_patch_whose_text_is_gone_stops_the_build(tmp_path: Path) -> None:
    kit = _kit()
    src = tmp_path / "demo-1.0-py3-none-any.whl"
    _wheel(src, {"demo/a.h": b"int x;\n"})
    with pytest.raises(SystemExit, match="lacks the text to patch"):
        kit.rewrite_wheel(src, tmp_path / "o.whl", patch={"demo/a.h": (b"absent", b"x")})


def test_the_lock_pins_every_wheel_by_hash_and_names_why_each_omission() -> None:
    kit = _kit()
    carried, left = kit.lock_entries()
    lines = [ln for ln in kit.LOCK.read_text().splitlines() if ln and not ln.startswith("#")]
    assert len(lines) == len(carried) > 50
    assert all(re.search(r" --hash=sha256:[0-9a-f]{64}$", ln) for ln in lines)
    names = {n for n, _ in carried}
    assert {"sglang", "sglang-kernel", "flashinfer-python", "transformers", "tokenizers"} <= names
    assert dict(carried)["sglang"] == "0.5.17" and dict(carried)["transformers"] == "5.12.1"
    for entry in left:  # "name==version  (why)"
        name = kit.norm(entry.split("==")[0])
        assert name not in names and re.search(r"\(.+\)$", entry), entry
    assert set(kit.SOURCE_PATCHES) <= names and set(kit.PRUNE) <= names


def _flags(cmd: list[str]) -> list[str]:
    i = cmd.index("--port")
    return cmd[:i] + cmd[i + 2 :]


def test_the_candidates_launch_what_sglang_sh_serves() -> None:
    cand, ctrl = load_candidate(CANDS / "candidate.toml"), load_candidate(CANDS / "control.toml")
    c, k = cand.candidate, ctrl.candidate
    assert c.server.launch is not None and k.server.launch is not None
    spec = ["--speculative-algorithm", "NGRAM", "--speculative-num-draft-tokens", "6"]
    assert c.server.launch.command[-4:] == spec
    assert _flags(c.server.launch.command)[:-4] == _flags(k.server.launch.command)
    assert c.identity.speculation.method == "ngram" and c.identity.speculation.draft_tokens == 5
    assert k.identity.speculation.method == "none"
    # sglang.sh's own command line, word for word (less the interpreter and the port)
    sh = (GPU / "sglang.sh").read_text()
    body = sh[sh.index("cmdline() {") : sh.index("start() {")]
    words = re.findall(r'--[a-z-]+|(?<= )[\w./$"{}-]+', body.split("printf '%s\\n' \"$PY\"", 1)[1])
    for flag in [w for w in c.server.launch.command if w.startswith("--")]:
        assert flag in words, flag
    for name in ("candidate-attach.toml", "control-attach.toml"):
        loaded = load_candidate(CANDS / name).candidate
        assert loaded.server.attach and loaded.identity.engine == "sglang"


def test_sglang_sh_parses_and_names_its_verbs() -> None:
    sh = GPU / "sglang.sh"
    assert subprocess.run(["bash", "-n", str(sh)], check=False).returncode == 0
    usage = subprocess.run(["bash", str(sh)], capture_output=True, text=True, check=False)
    assert usage.returncode == 2
    for verb in ("stage", "install", "convert", "serve", "probe", "stop", "up", "attach"):
        assert f"sglang.sh {verb}" in usage.stdout
