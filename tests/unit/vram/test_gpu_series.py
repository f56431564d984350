"""The sample log: written into the run as the sampler goes, read back whole, figures per
stage over every attempt."""

from __future__ import annotations

from pathlib import Path

from gpu_recorded import proof, replayed_sampler

from qualify.evidence.store import EvidenceStore
from qualify.vram.series import SampleLog, figures, missed_intervals, read_logs


def test_the_log_on_disk_gives_the_figures_the_memory_log_gives(tmp_path: Path) -> None:
    """The H200 replay logged into a run and into memory: the same per-stage figures, equal to
    the live run's."""
    run = EvidenceStore(tmp_path).new_run("c")
    on_disk = replayed_sampler(log=SampleLog(run))
    on_disk.stop()
    in_memory = replayed_sampler()
    disk = figures(read_logs(run))["0"].stages
    memory = in_memory.figures()["0"].stages
    assert {s: f.model_dump() | {"attempts": []} for s, f in disk.items()} == {
        s: f.model_dump() | {"attempts": []} for s, f in memory.items()
    }
    live = proof()["sources"]["nvml"]["cards"]["0"]["stages"]
    for stage, want in live.items():
        assert disk[stage].min_free_mib == want["min_free_mib"], stage
        assert disk[stage].samples == want["samples"], stage


def test_a_line_cut_by_a_kill_is_skipped(tmp_path: Path) -> None:
    """A log whose process died mid-line: every whole line is read, the cut one is not."""
    run = EvidenceStore(tmp_path).new_run("c")
    log = SampleLog(run)
    log.open({"interval_ms": 250, "cards": [{"gpu": "0", "name": "c", "total_mib": 1.0}]})
    log.write({"mark": "a", "t_s": 0.0})
    log.write([0.25, "a", "0", 100.0, None, None])
    assert log._out is not None
    log._out.write(b'[0.5, "a", "0", 5')  # killed here
    (back,) = read_logs(run)
    assert back.summary is None
    assert figures([back])["0"].stages["a"].samples == 1


def test_missed_intervals() -> None:
    """Up to twice the interval is no gap; beyond, the whole intervals skipped."""
    assert missed_intervals(0.25, 0.25) == 0
    assert missed_intervals(0.5, 0.25) == 0
    assert missed_intervals(0.75, 0.25) == 2
    assert missed_intervals(2.5, 0.25) == 9
