"""Parts of a stage in the sample log (a context rung, an A/B lane's timed run) and each card's
figures over a window: the lowest free memory and the mean power."""

from __future__ import annotations

import pytest

from qualify.vram.readings import Card, Poll, Reading
from qualify.vram.sampler import Sampler, parts_of
from qualify.vram.series import figures, marked_stages


class TwoCards:
    """Two cards, never polled by a thread: the test feeds readings with `ingest`."""

    name, power_field, memory_info = "fake", "instant", "v2"

    def cards(self) -> list[Card]:
        return [Card("0", "fake", 80_000.0), Card("1", "fake", 80_000.0)]

    def poll(self) -> Poll:
        return Poll([], [], [])

    def close(self) -> None:
        return None


def _feed(s: Sampler, t: float, free0: float, free1: float, watts: float) -> None:
    s.ingest(
        Poll([Reading("0", t, free0, None, watts), Reading("1", t, free1, None, 2 * watts)], [], [])
    )


def test_parts_are_logged_within_their_stage_and_older_readers_pass_over_them() -> None:
    s = Sampler(TwoCards(), 250)
    s.part("before any stage", at=99.0)  # nothing sampled yet: nothing to cut
    s.mark("context", at=100.0)
    _feed(s, 100.25, 9000.0, 8000.0, 100.0)
    s.part("16384 cold c1", at=100.4)
    _feed(s, 100.5, 2000.0, 7000.0, 300.0)
    _feed(s, 100.75, 2500.0, 7000.0, 300.0)
    s.part(None, at=100.9)
    _feed(s, 101.0, 9000.0, 8000.0, 100.0)
    lines = s.log.lines
    parts = [x for x in lines if isinstance(x, dict) and "part" in x]
    assert parts == [
        {"part": "16384 cold c1", "stage": "context", "t_s": 0.4},
        {"part": None, "stage": "context", "t_s": 0.9},
    ]
    # Samples stay filed under the stage: the per-stage figures and stage list are as before.
    log = s.log.read()
    assert log is not None
    cards = figures([log])
    assert list(cards["0"].stages) == ["context"]
    assert cards["0"].stages["context"].min_free_mib == 2000.0
    assert cards["0"].stages["context"].samples == 4
    assert marked_stages([log]) == ["context"]


def test_a_window_gives_each_cards_lowest_free_memory_and_mean_power() -> None:
    s = Sampler(TwoCards(), 250)
    s.mark("ab", at=0.0)
    for k in range(9):  # 0, 0.25 .. 2.0 s; card 0 dips to 1,000 MiB at 1.0 s
        t = k * 0.25
        _feed(s, t, 1000.0 if t == 1.0 else 5000.0, 6000.0, 200.0)
    w = s.window(0.6, 1.6)
    assert w.why is None
    assert w.cards["0"].min_free_mib == 1000.0
    assert w.cards["1"].min_free_mib == 6000.0
    assert w.cards["0"].samples == 4  # 0.75, 1.0, 1.25, 1.5
    assert w.cards["0"].mean_power_w == pytest.approx(200.0)
    assert w.cards["1"].mean_power_w == pytest.approx(400.0)
    # A window shorter than the interval still has the state it started in.
    short = s.window(1.05, 1.1)
    assert short.cards["0"].samples == 0 and short.cards["0"].min_free_mib == 1000.0


def test_no_telemetry_is_said_once_and_a_run_without_a_sampler_has_no_parts() -> None:
    w = Sampler(None, unavailable="NVML: no driver").window(0.0, 1.0)
    assert w.cards == {} and w.why == "no GPU telemetry (NVML: no driver)"
    assert parts_of(None) is None
    assert parts_of(Sampler(None)) is not None
