"""The readable console: one line per stage, a progress bar for long steps (rich)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.progress import Progress as RichProgress

from qualify.records import Verdict

_STYLE = {
    Verdict.PASS: "green",
    Verdict.FAIL: "red",
    Verdict.ERROR: "magenta",
    Verdict.INCONCLUSIVE: "yellow",
    Verdict.SKIPPED: "dim",
}


class Task:
    def __init__(self, bar: RichProgress | None, task_id: TaskID | None) -> None:
        self._bar, self._id = bar, task_id

    def advance(self, n: int = 1, note: str | None = None) -> None:
        if self._bar is not None and self._id is not None:
            self._bar.update(self._id, advance=n, description=note)


@dataclass
class Progress:
    """Console output for people; quiet mode prints only stage verdicts."""

    console: Console = field(
        default_factory=lambda: Console(stderr=True, highlight=False, soft_wrap=True)
    )
    quiet: bool = False

    def say(self, msg: str) -> None:
        self.console.print(msg)

    def verdict(self, what: str, v: Verdict, detail: str = "") -> None:
        style = _STYLE[v]
        self.console.print(f"  [{style}]{v.value:>12}[/{style}]  {what}  [dim]{detail}[/dim]")

    @contextmanager
    def task(self, description: str, total: int) -> Iterator[Task]:
        if self.quiet or not self.console.is_terminal:
            self.console.print(f"  {description} ({total} steps)")
            yield Task(None, None)
            return
        bar = RichProgress(
            TextColumn("  {task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=self.console,
            transient=True,
        )
        with bar:
            yield Task(bar, bar.add_task(description, total=total))
