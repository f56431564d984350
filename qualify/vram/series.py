"""The sample log: every sample the sampler takes, written into the run's evidence as it is
taken, and read back, from every attempt, into per-card, per-stage figures.

One `telemetry/attempt-NNN/` per sampler (per `qualify run` or `--resume`): `header.json`
(source, power field, memory version, interval, cards), then `samples.NNN.jsonl`, appended as
the run goes (so a run killed mid-stage keeps what it sampled), then `summary.json` and the seal
when the sampler stops. A line is a sample `[t_s, stage, gpu, free_mib, used_mib, power_w]`, a
stage start `{"mark": stage, "t_s": t}` or a lost card `{"lost": gpu, "stage", "t_s", "why"}`.

The vram stage judges from these files only, so a resumed run is judged over every stage that
ever ran, from every attempt's samples.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qualify.evidence.store import Attempt, ChunkedWriter, RunDir
from qualify.vram.record import Card, Lost, StageFigures

TELEMETRY = "telemetry"
COLUMNS = ["t_s", "stage", "gpu", "free_mib", "used_mib", "power_w"]
_SAMPLES = re.compile(r"^samples\.\d{3}\.jsonl$")
# A line as written: a sample (the columns), or a stage mark, a part mark or a lost card.
Line = list[float | str | None] | dict[str, float | str | None]


class SampleLog:
    """Where one sampler writes: an attempt of `telemetry/` opened at the first stage mark, or,
    with no run (benches, tests), a list in memory."""

    def __init__(self, run: RunDir | None = None) -> None:
        self.run = run
        self.attempt: Attempt | None = None
        self._out: ChunkedWriter | None = None
        self.header: dict[str, object] | None = None
        self.lines: list[Line] = []
        self.summary: dict[str, object] | None = None

    def open(self, header: dict[str, object]) -> None:
        self.header = {"version": 1, "columns": COLUMNS, **header}
        if self.run is not None:
            self.attempt = self.run.new_attempt(TELEMETRY)
            self.attempt.write_json("header.json", self.header)
            self._out = self.attempt.stream("samples", "jsonl")

    def write(self, item: Line) -> None:
        if self._out is not None:
            self._out.write((json.dumps(item) + "\n").encode())
        elif self.run is None and self.header is not None:
            self.lines.append(item)

    def close(self, summary: dict[str, object]) -> None:
        """Write the summary and seal; safe to call twice, and before `open` (no-op)."""
        if self.header is None or self.summary is not None:
            return
        self.summary = summary
        if self.attempt is not None:
            self.attempt.write_json("summary.json", summary)
            self.attempt.seal()

    def read(self) -> Log | None:
        """What this sampler logged, as the vram stage would read it; None before any mark."""
        if self.attempt is not None:
            return read_log(self.attempt.path, self.attempt.number)
        if self.header is None:
            return None
        return Log(0, Path("."), self.header, list(self.lines), self.summary)


@dataclass
class Log:
    """One sampler's log as read back; `summary` is None when its process never stopped it."""

    attempt: int
    path: Path
    header: dict[str, Any]  # raw JSON of header.json
    lines: list[Any]  # raw JSON lines of samples.NNN.jsonl
    summary: dict[str, Any] | None  # raw JSON of summary.json
    files: list[str] = field(default_factory=list)  # its samples.NNN.jsonl, in order


def parse_log(
    attempt: int, path: Path, read: Callable[[str], bytes], names: Iterable[str]
) -> Log | None:
    """One telemetry attempt from its files (`names`, each read by `read`): from the run's
    directory, or, for `verify`, from the signed files. None without a header; a line cut short
    by a kill is skipped."""
    names = sorted(names)
    if "header.json" not in names:
        return None
    try:
        head = json.loads(read("header.json"))
    except ValueError:
        return None
    files = [n for n in names if _SAMPLES.match(n)]
    lines: list[Any] = []  # raw JSON lines
    for name in files:
        for line in read(name).decode(errors="replace").splitlines():
            with contextlib.suppress(ValueError):
                lines.append(json.loads(line))
    tail = None
    with contextlib.suppress(ValueError):
        tail = json.loads(read("summary.json")) if "summary.json" in names else None
    return Log(attempt, path, head, lines, tail, files)


def read_log(path: Path, attempt: int) -> Log | None:
    """One telemetry attempt from its directory."""
    names = (p.name for p in path.iterdir())
    return parse_log(attempt, path, lambda name: (path / name).read_bytes(), names)


def read_logs(run: RunDir) -> list[Log]:
    """Every telemetry attempt of the run, in order."""
    logs = (read_log(d, int(d.name.rsplit("-", 1)[-1])) for d in run.attempt_dirs(TELEMETRY))
    return [log for log in logs if log is not None]


def missed_intervals(step_s: float, interval_s: float) -> int:
    """Sampler intervals a step skipped: none up to twice the interval, else the step in
    whole intervals less the one that was taken."""
    if step_s <= 2 * interval_s:
        return 0
    return max(1, round(step_s / interval_s) - 1)


def figures(logs: list[Log]) -> dict[str, Card]:
    """Per card, per stage, over every log."""
    cards: dict[str, Card] = {}
    for log in logs:
        interval = float(log.header.get("interval_ms") or 250) / 1000.0
        for c in log.header.get("cards") or []:
            gpu = str(c.get("gpu"))
            cards.setdefault(
                gpu, Card(gpu=gpu, name=str(c.get("name") or ""), total_mib=c.get("total_mib"))
            )
        last: dict[str, float] = {}
        for line in log.lines:
            if isinstance(line, dict) and "lost" in line:
                card = cards.get(str(line["lost"]))
                if card is not None and card.lost is None:
                    card.lost = Lost.model_validate({**line, "attempt": log.attempt})
                continue
            if not isinstance(line, list) or len(line) != len(COLUMNS):
                continue
            t, stage, gpu, free, _used, power = line
            card = cards.setdefault(str(gpu), Card(gpu=str(gpu)))
            step = t - last[gpu] if gpu in last else 0.0
            last[gpu] = t
            st = card.stages.setdefault(str(stage), StageFigures())
            st.add(float(free), power, missed_intervals(step, interval), log.attempt)
    return cards


def marked_stages(logs: list[Log]) -> list[str]:
    """Every stage some sampler saw start, in order of first appearance."""
    marks = (line for log in logs for line in log.lines if isinstance(line, dict))
    return list(dict.fromkeys(str(line["mark"]) for line in marks if "mark" in line))
