"""NVML through nvidia-ml-py: free, used and total memory and power of each local GPU.

Memory comes from `nvmlDeviceGetMemoryInfo` version 2. `free` is the same in both versions,
and it is what the reserve policy reads; v2's `used` leaves out the memory the driver reserves
(about 615 MiB on an H200), so it agrees with `nvidia-smi memory.used` and DCGM's
`DCGM_FI_DEV_FB_USED`, and the three sources can be compared figure for figure. Version 1 is the
fallback on a driver without v2, and is named in `memory_info`.

Power comes from the field `NVML_FI_DEV_POWER_INSTANT` where the driver has it: on Ampere and
newer `nvmlDeviceGetPowerUsage` is a one-second average, too slow to see a 250 ms spike. Where the
field is missing, the average is used and `power_field` says so.
"""

from __future__ import annotations

import contextlib
import importlib
import time
from collections.abc import Callable
from types import ModuleType
from typing import Protocol

from qualify.vram.readings import MIB, Card, Lost, Poll, Reading

POWER_INSTANT = "NVML_FI_DEV_POWER_INSTANT"
POWER_AVERAGE = "nvmlDeviceGetPowerUsage (1 s average)"


class MemoryInfo(Protocol):
    """What `nvmlDeviceGetMemoryInfo` answers (a ctypes structure), in bytes."""

    total: int
    free: int
    used: int


class NvmlUnavailable(Exception):
    """NVML did not initialise, or found no GPU: the reason, in words."""


def load_pynvml() -> ModuleType:
    try:
        return importlib.import_module("pynvml")
    except ImportError as exc:  # the dependency is declared; a broken install still says why
        raise NvmlUnavailable(f"nvidia-ml-py is not importable ({exc})") from None


class NvmlSource:
    """Local GPUs through NVML; `nvml` is the pynvml module (a recording replays in tests)."""

    name = "nvml"

    def __init__(
        self,
        gpus: list[int] | None = None,
        nvml: ModuleType | None = None,  # pynvml, or a replay of it in tests
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.nv = nvml if nvml is not None else load_pynvml()
        self.clock = clock
        # the raw values, when a proof asks
        self.record: list[dict[str, str | float | None]] | None = None
        try:
            self.nv.nvmlInit()
        except self.nv.NVMLError as exc:
            raise NvmlUnavailable(f"NVML did not initialise: {exc}") from None
        try:
            self._open(gpus)
        except self.nv.NVMLError as exc:
            self.nv.nvmlShutdown()
            raise NvmlUnavailable(f"NVML could not list the GPUs: {exc}") from None

    def _open(self, gpus: list[int] | None) -> None:
        count = self.nv.nvmlDeviceGetCount()
        wanted = list(range(count)) if gpus is None else gpus
        if missing := [i for i in wanted if i >= count]:
            raise NvmlUnavailable(f"NVML sees {count} GPU(s); stages.vram.gpus names {missing}")
        if not wanted:
            raise NvmlUnavailable("NVML initialised but found no GPU")
        self.handles = {str(i): self.nv.nvmlDeviceGetHandleByIndex(i) for i in wanted}
        first = next(iter(self.handles.values()))
        try:
            self.nv.nvmlDeviceGetMemoryInfo(first, version=self.nv.nvmlMemory_v2)
            self.memory_info = "v2"
        except self.nv.NVMLError:
            self.memory_info = "v1"
        fields = (f for f in (POWER_INSTANT, POWER_AVERAGE) if self._power_w(first, f) is not None)
        self.power_field = next(fields, None)
        self._cards = [self._card(gpu, h) for gpu, h in self.handles.items()]

    def _card(self, gpu: str, h: object) -> Card:
        name = self.nv.nvmlDeviceGetName(h)
        uuid = self.nv.nvmlDeviceGetUUID(h)
        total = self._memory(h).total / MIB
        return Card(gpu=gpu, name=str(name), total_mib=total, uuid=str(uuid))

    def cards(self) -> list[Card]:
        return list(self._cards)

    def system(self) -> dict[str, str | None]:
        """The driver, the CUDA version the driver supports, and NVML's own version, where NVML
        gives them (None where a call is missing or fails)."""

        def ask(name: str) -> int | str | bytes | None:
            try:
                value: int | str | bytes = getattr(self.nv, name)()
            except (AttributeError, self.nv.NVMLError):  # a call this pynvml lacks, or failed
                return None
            return value

        cuda = ask("nvmlSystemGetCudaDriverVersion_v2") or ask("nvmlSystemGetCudaDriverVersion")
        cuda_text = f"{int(cuda) // 1000}.{int(cuda) % 1000 // 10}" if cuda else None
        driver, nvml = ask("nvmlSystemGetDriverVersion"), ask("nvmlSystemGetNVMLVersion")
        return {
            "driver_version": None if driver is None else _text(driver),
            "cuda_driver_version": cuda_text,
            "nvml_version": None if nvml is None else _text(nvml),
        }

    def _memory(self, h: object) -> MemoryInfo:
        v2 = {"version": self.nv.nvmlMemory_v2} if self.memory_info == "v2" else {}
        info: MemoryInfo = self.nv.nvmlDeviceGetMemoryInfo(h, **v2)
        return info

    def _power_w(self, h: object, field: str | None) -> float | None:
        """Watts through `field` (`power_field`); None where the read fails, but a lost card
        raises."""
        try:
            if field == POWER_INSTANT:
                (fv,) = self.nv.nvmlDeviceGetFieldValues(h, [self.nv.NVML_FI_DEV_POWER_INSTANT])
                ok = fv.nvmlReturn == self.nv.NVML_SUCCESS
                return int(fv.value.uiVal) / 1000.0 if ok else None
            if field == POWER_AVERAGE:
                return int(self.nv.nvmlDeviceGetPowerUsage(h)) / 1000.0
        except self.nv.NVMLError_GpuIsLost:
            raise
        except (self.nv.NVMLError, AttributeError):
            pass
        return None

    def poll(self) -> Poll:
        out = Poll([], [], [])
        for gpu, h in list(self.handles.items()):
            try:
                mem = self._memory(h)
                power = self._power_w(h, self.power_field)
            except self.nv.NVMLError as exc:
                # Any NVML error on a handle mid-run means the card is gone (fell off the bus,
                # reset, or the driver lost it): stop asking it and say so.
                out.lost.append(Lost(gpu, self.clock(), f"NVML {type(exc).__name__}: {exc}"))
                del self.handles[gpu]
                continue
            t = self.clock()
            out.readings.append(Reading(gpu, t, mem.free / MIB, mem.used / MIB, power))
            if self.record is not None:
                self.record.append(_raw(gpu, t, mem, power))
        return out

    def close(self) -> None:
        with contextlib.suppress(self.nv.NVMLError):
            self.nv.nvmlShutdown()


def _text(v: int | str | bytes) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def _raw(gpu: str, t: float, mem: MemoryInfo, power: float | None) -> dict[str, str | float | None]:
    return {
        "gpu": gpu,
        "t": t,
        "total": int(mem.total),
        "free": int(mem.free),
        "used": int(mem.used),
        "reserved": int(getattr(mem, "reserved", 0)),
        "power_mw": None if power is None else round(power * 1000),
    }
