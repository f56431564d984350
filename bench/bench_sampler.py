"""The GPU sampler's own cost per sample, per source, and whether it slows the GPU down.

    python bench/bench_sampler.py [--out FILE] [--n 2000] [--gpu-seconds 4]

- nvml: `NvmlSource.poll()` back to back (wall and CPU time of the calling thread);
- dcgm: one scrape and parse of a local page in dcgm-exporter's format (the recorded H200 page);
- gpu: bf16 matmul throughput with no sampler, with the 250 ms NVML sampler, and with a 10 ms
  one (40 times the normal rate), in one process, so only the ratio matters.
Sources that are not there (no GPU) are reported as skipped. Results: docs/gpu-sampler.md.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from qualify.vram.dcgm import DcgmSource  # noqa: E402
from qualify.vram.nvml import NvmlSource, NvmlUnavailable  # noqa: E402
from qualify.vram.sampler import Sampler, percentile  # noqa: E402

DATA = ROOT / "tests" / "unit" / "gpu" / "data"
PORT = 18690


def _stats(wall: list[float], cpu: list[float]) -> dict[str, Any]:
    return {
        "n": len(wall),
        "wall_us_p50": percentile(wall, 50),
        "wall_us_p99": percentile(wall, 99),
        "cpu_us_p50": percentile(cpu, 50),
        "cpu_us_p99": percentile(cpu, 99),
    }


def _timed(fn: Any, n: int) -> dict[str, Any]:
    wall, cpu = [], []
    for _ in range(n):
        c0, w0 = time.thread_time(), time.perf_counter()
        fn()
        wall.append((time.perf_counter() - w0) * 1e6)
        cpu.append((time.thread_time() - c0) * 1e6)
    return _stats(wall, cpu)


def bench_nvml(n: int) -> dict[str, Any]:
    try:
        src = NvmlSource()
    except NvmlUnavailable as exc:
        return {"skipped": str(exc)}
    try:
        out = _timed(src.poll, n)
        out.update(cards=len(src.cards()), power_field=src.power_field)
        return out
    finally:
        src.close()


def _serve(text: str) -> ThreadingHTTPServer:
    body = text.encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", PORT), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def bench_dcgm(n: int, data: Path) -> dict[str, Any]:
    server = _serve((data / "dcgm-peak.txt").read_text())
    try:
        src = DcgmSource([f"http://127.0.0.1:{PORT}/metrics"], 250)
        out = _timed(src.poll, n)
        src.close()
        return out
    finally:
        server.shutdown()
        server.server_close()


def _matmul_rate(torch: Any, seconds: float) -> float:
    a = torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda")
    c = torch.empty_like(a)
    torch.matmul(a, a, out=c)
    torch.cuda.synchronize()
    n, end = 0, time.monotonic() + seconds
    t0 = time.perf_counter()
    while time.monotonic() < end:
        for _ in range(50):
            torch.matmul(a, a, out=c)
        torch.cuda.synchronize()
        n += 50
    return 2 * 8192**3 * n / (time.perf_counter() - t0) / 1e12


def bench_gpu(seconds: float) -> dict[str, Any]:
    try:
        torch = importlib.import_module("torch")
    except ImportError:
        return {"skipped": "no torch"}
    if not torch.cuda.is_available():
        return {"skipped": "torch sees no GPU"}
    out: dict[str, Any] = {"unit": "bf16 TFLOP/s, 8192^3 matmul"}
    _matmul_rate(torch, 1.0)  # warm-up: clocks up, cuBLAS picked
    out["off_before"] = _matmul_rate(torch, seconds)
    for ms in (250, 10):
        s = Sampler(NvmlSource(), ms).start()
        s.mark("bench")
        out[f"nvml_{ms}ms"] = _matmul_rate(torch, seconds)
        s.stop()
        out[f"nvml_{ms}ms_samples"] = sum(t.samples for t in s.tracks.values())
    out["off_after"] = _matmul_rate(torch, seconds)
    base = (out["off_before"] + out["off_after"]) / 2
    out["ratio_250ms"] = out["nvml_250ms"] / base
    out["ratio_10ms"] = out["nvml_10ms"] / base
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path)
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--data", type=Path, default=DATA, help="dcgm-peak.txt")
    ap.add_argument("--gpu-seconds", type=float, default=4.0)
    args = ap.parse_args()
    result = {
        "nvml_poll": bench_nvml(args.n),
        "dcgm_poll": bench_dcgm(min(args.n, 500), args.data),
        "gpu_disturbance": bench_gpu(args.gpu_seconds),
    }
    text = json.dumps(result, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
