"""The sampler thread: a fixed monotonic schedule, no busy loop, nothing before the first mark."""

from __future__ import annotations

import threading
import time

from qualify.vram.readings import Card, Poll, Reading
from qualify.vram.sampler import Sampler, percentile


class Counting:
    """A source with one card whose reads take `cost` seconds; counts its polls."""

    name = "counting"
    power_field = None
    memory_info = "test"

    def __init__(self, cost: float = 0.0, fail_after: int | None = None) -> None:
        self.cost, self.fail_after, self.polls = cost, fail_after, 0
        self.closed = threading.Event()

    def cards(self) -> list[Card]:
        return [Card("0", "test card", 1000.0)]

    def poll(self) -> Poll:
        self.polls += 1
        if self.fail_after is not None and self.polls > self.fail_after:
            raise RuntimeError("driver went away")
        time.sleep(self.cost)
        return Poll([Reading("0", time.monotonic(), 500.0 - self.polls, None, None)], [], [])

    def close(self) -> None:
        self.closed.set()


def test_nothing_is_read_before_the_first_mark() -> None:
    """Started but never marked, the sampler reads nothing and closes its source on stop."""
    src = Counting()
    s = Sampler(src, 10).start()
    time.sleep(0.1)
    s.stop()
    assert src.polls == 0 and src.closed.is_set()
    assert s.stages() == []


def test_schedule_is_not_a_busy_loop() -> None:
    """Over a window, reads never outnumber the ticks of the schedule (plus the first)."""
    src = Counting()
    s = Sampler(src, 20).start()
    s.mark("a")
    t0 = time.monotonic()
    time.sleep(0.3)
    s.stop()
    elapsed = time.monotonic() - t0
    assert 1 <= src.polls <= int(elapsed / 0.02) + 2
    assert s.figures()["0"].stages["a"].samples == src.polls


def test_slow_reads_skip_ticks_and_count_gaps() -> None:
    """Reads that take 2.5 intervals do not burst to catch up: missed ticks are skipped and
    each long interval counts as a gap."""
    src = Counting(cost=0.05)
    s = Sampler(src, 20).start()
    s.mark("slow")
    time.sleep(0.4)
    s.stop()
    stats = s.figures()["0"].stages["slow"]
    assert src.polls <= 0.45 / 0.05 + 1
    assert stats.gaps == stats.samples - 1 >= 3


def test_samples_are_filed_under_the_stage_running() -> None:
    """Marks split the samples between stages; the lowest free memory is per stage."""
    src = Counting()
    s = Sampler(src, 10).start()
    s.mark("one")
    time.sleep(0.1)
    s.mark("two")
    time.sleep(0.1)
    s.stop()
    one, two = s.figures()["0"].stages["one"], s.figures()["0"].stages["two"]
    assert one.samples and two.samples
    assert one.min_free_mib is not None and two.min_free_mib is not None
    assert two.min_free_mib < one.min_free_mib  # the counting card loses 1 MiB a read
    assert s.stages() == ["one", "two"]


def test_a_source_that_raises_ends_sampling_with_a_failure() -> None:
    """An exception from the source stops the thread, closes the source and is kept."""
    src = Counting(fail_after=2)
    s = Sampler(src, 10).start()
    s.mark("x")
    assert src.closed.wait(5)
    s.stop()
    assert s.failure and "driver went away" in s.failure


def test_percentile_interpolates() -> None:
    """p50 of 1..4 is 2.5; p99 lies just under the top; no values is None."""
    assert percentile([4, 1, 3, 2], 50) == 2.5
    p99 = percentile([1.0, 2.0, 3.0, 4.0], 99)
    assert p99 is not None and 3.9 < p99 < 4.0
    assert percentile([], 50) is None
