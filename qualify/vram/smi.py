"""The `nvidia-smi` CSV stream, for a host where NVML cannot be loaded in-process.

One long-running `nvidia-smi --query-gpu=... -lms N` prints one line per GPU every N ms; a reader
thread queues the lines and each poll takes what arrived. The sample time is nvidia-smi's own
`timestamp` column (millisecond wall clock), mapped onto the monotonic clock once at start, so
pipe buffering cannot shift a sample in time.
"""

from __future__ import annotations

import queue
import shutil
import subprocess
import threading
import time
from datetime import datetime
from typing import IO

from qualify.vram.readings import Card, Lost, Poll, Reading, number

FIELDS = [
    "index",
    "pci.bus_id",
    "timestamp",
    "memory.free",
    "memory.used",
    "memory.total",
    "power.draw.instant",
    "power.draw",
    "name",  # last: a name is the only field that could hold a comma
]
POWER_INSTANT = "nvidia-smi power.draw.instant"
POWER_AVERAGE = "nvidia-smi power.draw (1 s average)"
_LOST_WORDS = ("GPU is lost", "Unable to determine the device handle")


class SmiUnavailable(Exception):
    """nvidia-smi is missing or refused the query: the reason, in words."""


def parse_line(line: str, offset: float) -> tuple[Reading, Card, str] | None:
    """One CSV line as (reading, card, bus id); None when it is not a sample line.

    `offset` maps nvidia-smi's wall-clock timestamp onto time.monotonic().
    """
    parts = [p.strip() for p in line.rstrip("\n").split(",", len(FIELDS) - 1)]
    if len(parts) != len(FIELDS) or not parts[0].isdigit():
        return None
    free = number(parts[3])
    total = number(parts[5])
    if free is None or total is None:
        return None
    try:
        stamp = datetime.strptime(parts[2], "%Y/%m/%d %H:%M:%S.%f").timestamp()
    except ValueError:
        return None
    power = number(parts[6])
    power = power if power is not None else number(parts[7])
    gpu = parts[0]
    reading = Reading(gpu, stamp - offset, free, number(parts[4]), power)
    return reading, Card(gpu=gpu, name=parts[8], total_mib=total), parts[1]


def lost_bus(line: str) -> str | None:
    """The message of a line that says a GPU is gone, or None."""
    return line.strip() if any(w in line for w in _LOST_WORDS) else None


def command(binary: str, interval_ms: int | None, gpus: list[int] | None) -> list[str]:
    cmd = [binary, "--query-gpu=" + ",".join(FIELDS), "--format=csv,noheader,nounits"]
    if gpus is not None:
        cmd.append("--id=" + ",".join(str(g) for g in gpus))
    if interval_ms is not None:
        cmd += ["-lms", str(interval_ms)]
    return cmd


class SmiSource:
    """Local GPUs through one `nvidia-smi` process that streams CSV."""

    name = "nvidia-smi"

    def __init__(self, interval_ms: int, gpus: list[int] | None = None) -> None:
        binary = shutil.which("nvidia-smi")
        if binary is None:
            raise SmiUnavailable("nvidia-smi is not on PATH")
        self.offset = time.time() - time.monotonic()
        self.memory_info = "nvidia-smi memory.free/used/total (MiB)"
        self.tee: IO[str] | None = None  # the raw stream, when a proof asks
        self._cards, self._bus, first_power = self._probe(binary, gpus)
        self.power_field = POWER_INSTANT if first_power else POWER_AVERAGE
        # nvidia-smi may block-buffer a pipe; stdbuf asks its stdio for a line at a time.
        line_buffered = ["stdbuf", "-oL"] if shutil.which("stdbuf") else []
        self.proc = subprocess.Popen(
            line_buffered + command(binary, interval_ms, gpus),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
        )
        self.lines: queue.SimpleQueue[tuple[float, str] | None] = queue.SimpleQueue()
        self.lag_ms: list[float] = []  # arrival minus nvidia-smi's timestamp, per line
        self.reader = threading.Thread(target=self._read, name="nvidia-smi-reader", daemon=True)
        self.reader.start()
        self.gone: set[str] = set()

    def _probe(
        self, binary: str, gpus: list[int] | None
    ) -> tuple[list[Card], dict[str, str], bool]:
        try:
            done = subprocess.run(
                command(binary, None, gpus), capture_output=True, text=True, timeout=20
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise SmiUnavailable(f"nvidia-smi did not answer: {exc}") from None
        parsed = [parse_line(line, self.offset) for line in done.stdout.splitlines()]
        found = [p for p in parsed if p is not None]
        if done.returncode != 0 or not found:
            said = (done.stdout + done.stderr).strip().splitlines()[-1:] or ["no output"]
            raise SmiUnavailable(f"nvidia-smi query failed (rc {done.returncode}): {said[0]}")
        cards = [card for _, card, _ in found]
        bus = {bus_id: card.gpu for _, card, bus_id in found}
        instant = number(done.stdout.splitlines()[0].split(",")[6]) is not None
        return cards, bus, instant

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put((time.monotonic(), line))
        self.lines.put(None)

    def cards(self) -> list[Card]:
        return list(self._cards)

    def poll(self) -> Poll:
        out = Poll([], [], [])
        while True:
            try:
                line = self.lines.get_nowait()
            except queue.Empty:
                return out
            if line is None:
                self._ended(out)
                return out
            if self.tee is not None:
                self.tee.write(line[1])
            self._take(line[0], line[1], out)

    def _take(self, arrived: float, line: str, out: Poll) -> None:
        parsed = parse_line(line, self.offset)
        if parsed is not None:
            if len(self.lag_ms) < 100_000:
                self.lag_ms.append((arrived - parsed[0].t) * 1000)
            if parsed[0].gpu not in self.gone:
                out.readings.append(parsed[0])
            return
        msg = lost_bus(line)
        if msg is None:
            return
        for bus_id, gpu in self._bus.items():
            if bus_id.lower() in line.lower() and gpu not in self.gone:
                self.gone.add(gpu)
                out.lost.append(Lost(gpu, time.monotonic(), f"nvidia-smi: {msg}"))

    def _ended(self, out: Poll) -> None:
        rc = self.proc.wait()
        for card in self._cards:
            if card.gpu not in self.gone:
                self.gone.add(card.gpu)
                why = f"nvidia-smi stopped streaming (exit status {rc})"
                out.lost.append(Lost(card.gpu, time.monotonic(), why))

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.reader.join(timeout=5)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
