"""A GPU sampler stand-in for the stages that mark their timed sends in the sampler's log (the
A/B drive per lane and run, the context ladder per cell): it records every part mark and every
window asked, and reads each window as the cards it was given."""

from __future__ import annotations

from qualify.records import CardWindow
from qualify.vram.sampler import Window


class FakeParts:
    """`cards`: card id -> (MiB below `free` that card reads, watts); each window reads every
    card at that free memory and power over `samples` samples; energy is card 0's power over
    the window."""

    def __init__(self, free: float, cards: dict[str, tuple[float, float]], samples: int) -> None:
        self.marks: list[tuple[str | None, float | None]] = []
        self.windows: list[tuple[float, float]] = []
        self.free, self.cards, self.samples = free, cards, samples

    def part(self, name: str | None, at: float | None = None) -> None:
        self.marks.append((name, at))

    def window(self, t0: float, t1: float) -> Window:
        self.windows.append((t0, t1))
        return Window(
            {
                card: CardWindow(
                    min_free_mib=self.free - below, mean_power_w=watts, samples=self.samples
                )
                for card, (below, watts) in self.cards.items()
            }
        )

    def energy(self, t0: float, t1: float) -> dict[str, object]:
        watts = self.cards["0"][1]
        return {"joules": watts * (t1 - t0), "window_s": t1 - t0, "cards": {}}

    def bounds(self) -> list[tuple[float | None, float | None]]:
        """The (opened, closed) send times of each marked part, in order."""
        opened = [at for n, at in self.marks if n is not None]
        closed = [at for n, at in self.marks if n is None]
        return list(zip(opened, closed, strict=True))
