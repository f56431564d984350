"""The GPU proof: the sampler, through NVML and DCGM at once, while PyTorch takes
and frees known amounts of GPU memory.

    python -m qualify.vram.proof OUT_DIR [--steps 10,40,80] [--hold 4]

Stages: `idle` (no CUDA context), `cuda-context` (context, cuBLAS and the matmul operands),
then per step `alloc-<N>GiB` (N GiB held, matmuls running for power) and `release-<N>GiB`.
The expected lowest free memory of `alloc-<N>GiB` is the free memory at the end of
`cuda-context` minus N GiB. Writes proof.json, nvml-baseline.json, nvml-samples.jsonl and
dcgm-*.txt into OUT_DIR. Needs torch and a GPU; not part of the CLI.
"""

from __future__ import annotations

import argparse
import importlib
import json
import platform
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from qualify.vram.dcgm import DcgmSource, render
from qualify.vram.nvml import NvmlSource, load_pynvml
from qualify.vram.readings import MIB
from qualify.vram.sampler import Sampler

GIB = 1 << 30
PORT = 18650


def _s(x: Any) -> str:
    return x.decode() if isinstance(x, bytes) else str(x)


def nvml_snapshot(nv: Any) -> list[dict[str, Any]]:
    """Every raw figure NVML gives for memory and power, both memory-info versions."""
    out = []
    for i in range(nv.nvmlDeviceGetCount()):
        h = nv.nvmlDeviceGetHandleByIndex(i)
        m1 = nv.nvmlDeviceGetMemoryInfo(h)
        m2 = nv.nvmlDeviceGetMemoryInfo(h, version=nv.nvmlMemory_v2)
        fvs = nv.nvmlDeviceGetFieldValues(
            h, [nv.NVML_FI_DEV_POWER_INSTANT, nv.NVML_FI_DEV_POWER_AVERAGE]
        )
        out.append(
            {
                "gpu": str(i),
                "name": _s(nv.nvmlDeviceGetName(h)),
                "uuid": _s(nv.nvmlDeviceGetUUID(h)),
                "pci_bus_id": _s(nv.nvmlDeviceGetPciInfo(h).busId),
                "memory_v1": {"total": m1.total, "free": m1.free, "used": m1.used},
                "memory_v2": {
                    "total": m2.total,
                    "free": m2.free,
                    "used": m2.used,
                    "reserved": m2.reserved,
                },
                "power_usage_mw": nv.nvmlDeviceGetPowerUsage(h),
                "field_power_instant": {"ret": fvs[0].nvmlReturn, "mw": fvs[0].value.uiVal},
                "field_power_average": {"ret": fvs[1].nvmlReturn, "mw": fvs[1].value.uiVal},
                "enforced_limit_mw": nv.nvmlDeviceGetEnforcedPowerLimit(h),
            }
        )
    return out


class Exporter:
    """A local page in dcgm-exporter's format, filled from NVML at each scrape (no DCGM here)."""

    def __init__(self, nv: Any, port: int) -> None:
        self.nv = nv
        self.pages: list[tuple[float, str]] = []
        snap = nvml_snapshot(nv)
        self.static = [{k: c[k] for k in ("gpu", "uuid", "pci_bus_id", "name")} for c in snap]
        self.driver = _s(nv.nvmlSystemGetDriverVersion())
        me = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = me.page().encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.url = f"http://127.0.0.1:{port}/metrics"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def page(self) -> str:
        cards = []
        for c in self.static:
            h = self.nv.nvmlDeviceGetHandleByIndex(int(c["gpu"]))
            m = self.nv.nvmlDeviceGetMemoryInfo(h, version=self.nv.nvmlMemory_v2)
            (fv,) = self.nv.nvmlDeviceGetFieldValues(h, [self.nv.NVML_FI_DEV_POWER_INSTANT])
            mib = {k: getattr(m, k) / MIB for k in ("free", "used", "reserved")}
            cards.append(dict(c, **mib, power=fv.value.uiVal / 1000))
        text = render(cards, platform.node(), self.driver)
        self.pages.append((time.monotonic(), text))
        return text


def summarise(s: Sampler) -> dict[str, Any]:
    assert s.source is not None
    cards = {}
    log, figs = s.log.read(), s.figures()
    lines = log.lines if log is not None else []
    for gpu, tr in s.tracks.items():
        fig = figs.get(gpu)
        cards[gpu] = {
            "name": tr.card.name,
            "total_mib": tr.card.total_mib,
            "stages": {k: v.model_dump() for k, v in (fig.stages.items() if fig else [])},
            "lost": vars(tr.lost) if tr.lost else None,
            # [t_s, stage, free_mib, used_mib, power_w, n], as earlier proofs wrote them
            "rows": [[r[0], r[1], *r[3:], 1] for r in lines if isinstance(r, list) and r[2] == gpu],
        }
    return {
        "source": s.source.name,
        "power_field": s.source.power_field,
        "memory_info": s.source.memory_info,
        "interval_ms": dict(s.interval_stats(), target=s.interval_ms, n=len(s.intervals)),
        "cost_ms": s.cost_stats(),
        "missed": s.missed,
        "problems": s.problems,
        "failure": s.failure,
        "cards": cards,
    }


def workload(samplers: list[Sampler], steps: list[int], hold: float, log: Any) -> dict[str, Any]:
    torch = importlib.import_module("torch")  # only on a GPU machine

    def mark(name: str) -> None:
        for s in samplers:
            s.mark(name)
        log(f"stage {name}")

    mark("idle")
    time.sleep(3)
    mark("cuda-context")
    torch.cuda.init()
    a = torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda")
    b = torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda")
    c = torch.empty_like(a)
    torch.matmul(a, b, out=c)
    torch.cuda.synchronize()
    time.sleep(3)
    nv = load_pynvml()
    h = nv.nvmlDeviceGetHandleByIndex(torch.cuda.current_device())
    base_free = nv.nvmlDeviceGetMemoryInfo(h, version=nv.nvmlMemory_v2).free / MIB
    facts: dict[str, Any] = {"base_free_mib": base_free, "torch": torch.__version__, "steps": []}
    facts["torch_reserved_base"] = torch.cuda.memory_reserved()
    for gib in steps:
        mark(f"alloc-{gib}GiB")
        buf = torch.empty(gib * GIB, dtype=torch.uint8, device="cuda")
        reserved = torch.cuda.memory_reserved()
        end = time.monotonic() + hold
        n = 0
        while time.monotonic() < end:
            for _ in range(20):
                torch.matmul(a, b, out=c)
            torch.cuda.synchronize()
            n += 20
        facts["steps"].append(
            {"gib": gib, "torch_reserved": reserved, "matmuls": n, "buffer_bytes": buf.numel()}
        )
        del buf
        torch.cuda.empty_cache()
        torch.cuda.synchronize()
        mark(f"release-{gib}GiB")
        time.sleep(2)
    return facts


def compare(facts: dict[str, Any], sources: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Expected against recorded lowest free memory, per step and per source."""
    rows = []
    for step in facts["steps"]:
        gib = step["gib"]
        expected = facts["base_free_mib"] - gib * 1024
        row: dict[str, Any] = {"gib": gib, "expected_min_free_mib": expected}
        row["torch_reserved_delta_mib"] = (
            step["torch_reserved"] - facts["torch_reserved_base"]
        ) / MIB
        for name, summ in sources.items():
            card = next(iter(summ["cards"].values()), None)
            got = (card or {}).get("stages", {}).get(f"alloc-{gib}GiB", {}).get("min_free_mib")
            row[name] = {"min_free_mib": got, "delta_mib": None if got is None else got - expected}
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m qualify.vram.proof")
    ap.add_argument("out", type=Path)
    ap.add_argument("--steps", default="10,40,80")
    ap.add_argument("--hold", type=float, default=4.0)
    args = ap.parse_args(argv)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    t_start = time.monotonic()

    def log(msg: str) -> None:
        print(f"[{time.monotonic() - t_start:7.2f}s] {msg}", flush=True)

    nv = load_pynvml()
    nv.nvmlInit()
    (out / "nvml-baseline.json").write_text(json.dumps(nvml_snapshot(nv), indent=1))
    exporter = Exporter(nv, PORT)
    nvml = NvmlSource()
    nvml.record = []
    dcgm = DcgmSource([exporter.url], 250)
    samplers = [Sampler(src, 250).start() for src in (nvml, dcgm)]
    try:
        facts = workload(samplers, [int(x) for x in args.steps.split(",")], args.hold, log)
    finally:
        for s in samplers:
            s.stop()
    with (out / "nvml-samples.jsonl").open("w") as fh:
        for rec in nvml.record:
            fh.write(json.dumps(rec) + "\n")
    _write_pages(out, exporter.pages)
    exporter.server.shutdown()
    sources = {s.source.name: summarise(s) for s in samplers if s.source is not None}
    proof: dict[str, Any] = {
        "version": 1,
        "host": platform.node(),
        "driver": _s(nv.nvmlSystemGetDriverVersion()),
        "nvml_baseline_file": "nvml-baseline.json",
        "facts": facts,
        "comparison": compare(facts, sources),
        "sources": sources,
    }
    (out / "proof.json").write_text(json.dumps(proof, indent=1))
    for row in proof["comparison"]:
        log(json.dumps(row))
    for name, summ in sources.items():
        log(f"{name}: interval {summ['interval_ms']} cost {summ['cost_ms']}")
    return 0


def _write_pages(out: Path, pages: list[tuple[float, str]]) -> None:
    """Two exporter pages as fixtures: the first (idle) and the one with least free memory."""
    if not pages:
        return
    (out / "dcgm-idle.txt").write_text(pages[0][1])

    def free(text: str) -> float:
        line = next(x for x in text.splitlines() if x.startswith("DCGM_FI_DEV_FB_FREE{"))
        return float(line.rsplit(" ", 1)[1])

    (out / "dcgm-peak.txt").write_text(min(pages, key=lambda p: free(p[1]))[1])


if __name__ == "__main__":
    raise SystemExit(main())
