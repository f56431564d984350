"""A pynvml stand-in that replays raw NVML values recorded on a real GPU.

It keeps pynvml's own constants and error classes (the real module imports without a GPU), and
answers the calls `NvmlSource` makes from the recording, one record per memory read.
"""

from __future__ import annotations

import types
from dataclasses import dataclass
from typing import Any

import pynvml


@dataclass
class _Mem:
    total: int
    free: int
    used: int
    reserved: int = 0


@dataclass
class _Value:
    uiVal: int


@dataclass
class _Field:
    nvmlReturn: int
    value: _Value


class ReplayNvml(types.SimpleNamespace):
    """Replays `records` (nvml-samples.jsonl rows) per GPU; `lose` maps a GPU to the read after
    which every call on its handle raises NVMLError_GpuIsLost."""

    def __init__(
        self,
        records: list[dict[str, Any]],
        info: dict[str, dict[str, Any]],
        lose: dict[str, int] | None = None,
        instant: bool = True,
        init_error: int | None = None,
    ) -> None:
        super().__init__()
        for name in dir(pynvml):
            if name.startswith(("NVML", "nvmlMemory_")):
                setattr(self, name, getattr(pynvml, name))
        self.by_gpu: dict[str, list[dict[str, Any]]] = {}
        for r in records:
            self.by_gpu.setdefault(r["gpu"], []).append(r)
        self.info, self.lose, self.instant = info, lose or {}, instant
        self.init_error = init_error
        self.reads = {gpu: 0 for gpu in self.by_gpu}
        self.current: dict[str, dict[str, Any]] = {}
        self.shutdowns = 0
        # Reads made while the source opens were not recorded on the GPU; they see the first
        # record and do not advance. `started` is set once the source is open.
        self.started = False
        self.last_t = records[0]["t"] if records else 0.0

    def clock(self) -> float:
        """The recorded time of the last memory read: a replay keeps the run's own timing."""
        return float(self.last_t)

    def nvmlInit(self) -> None:
        if self.init_error is not None:
            raise pynvml.NVMLError(self.init_error)

    def nvmlShutdown(self) -> None:
        self.shutdowns += 1

    def nvmlDeviceGetCount(self) -> int:
        return len(self.by_gpu)

    def nvmlDeviceGetHandleByIndex(self, i: int) -> str:
        return str(i)

    def _check(self, h: str, done: int = 0) -> None:
        """Raise once `lose[h]` reads have completed (`done`: reads counted already)."""
        if h in self.lose and self.reads[h] - done >= self.lose[h]:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)

    def nvmlDeviceGetMemoryInfo(self, h: str, version: int | None = None) -> _Mem:
        self._check(h)
        rows = self.by_gpu[h]
        rec = rows[min(self.reads[h], len(rows) - 1)]
        self.reads[h] += int(self.started)
        self.current[h] = rec
        self.last_t = rec["t"]
        if version is None:  # v1: used counts the driver's reservation
            return _Mem(rec["total"], rec["free"], rec["used"] + rec["reserved"])
        return _Mem(rec["total"], rec["free"], rec["used"], rec["reserved"])

    def nvmlDeviceGetFieldValues(self, h: str, ids: list[int]) -> list[_Field]:
        self._check(h, done=int(self.started))
        rec = self.current.get(h) or self.by_gpu[h][0]
        ok = self.instant and rec["power_mw"] is not None
        ret = pynvml.NVML_SUCCESS if ok else pynvml.NVML_ERROR_NOT_SUPPORTED
        return [_Field(ret, _Value(rec["power_mw"] or 0)) for _ in ids]

    def nvmlDeviceGetPowerUsage(self, h: str) -> int:
        self._check(h, done=int(self.started))
        rec = self.current.get(h) or self.by_gpu[h][0]
        return int(rec["power_mw"])

    def nvmlDeviceGetName(self, h: str) -> str:
        return str(self.info[h]["name"])

    def nvmlDeviceGetUUID(self, h: str) -> str:
        return str(self.info[h]["uuid"])


class FakeExporter:
    """A local dcgm-exporter stand-in (ports 18600-18699) serving `page` with `status`."""

    def __init__(self, port: int, page: str) -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.page, self.status, self.hits = page, 200, 0
        me = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                me.hits += 1
                body = me.page.encode()
                self.send_response(me.status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.url = f"http://127.0.0.1:{port}/metrics"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
