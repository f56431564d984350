"""DCGM exporter pages: dcgm-exporter's format, figures from the H200 run."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from gpu_fakes import FakeExporter
from gpu_recorded import DATA, judged, proof

from qualify.records import Verdict
from qualify.vram.dcgm import POWER, DcgmSource, DcgmUnavailable, prefixes, readings
from qualify.vram.sampler import Sampler

PEAK = (DATA / "dcgm-peak.txt").read_text()
IDLE = (DATA / "dcgm-idle.txt").read_text()


def test_peak_page_gives_the_h200_figures() -> None:
    """The page at the 80 GiB step: free, used and power as the NVML sampler saw them, and a
    total (free + used + reserved) equal to the card's 143,771 MiB."""
    (r,), (card,) = readings(PEAK, "node-b", 1.0)
    assert (r.gpu, card.name) == ("node-b:0", "NVIDIA H200")
    live = proof()["sources"]["nvml"]["cards"]["0"]["stages"]["alloc-80GiB"]
    assert r.free_mib == round(live["min_free_mib"])
    assert r.power_w == live["peak_power_w"]
    assert card.total_mib == 143771.0


def test_page_without_memory_lists_no_gpu() -> None:
    """A page with no DCGM_FI_DEV_FB_FREE gives no card (power alone is not telemetry)."""
    only_power = "\n".join(x for x in PEAK.splitlines() if "FB_" not in x) + "\n"
    assert readings(only_power, "h", 0.0) == ([], [])


def test_prefixes_are_unique() -> None:
    """Two exporters on one host are told apart by port; one per host by host alone."""
    got = prefixes(["http://a:9400/metrics", "http://b:9400/metrics", "http://b:9401/metrics"])
    assert got == ["a", "b:9400", "b:9401"]


@pytest.fixture
def exporter() -> Iterator[FakeExporter]:
    ex = FakeExporter(18601, IDLE)
    yield ex
    ex.close()


def test_scrapes_missed_and_lost(exporter: FakeExporter) -> None:
    """A 500 is a missed sample; a page that stops listing the GPU loses it; then the gate is
    error, naming the URL."""
    src = DcgmSource([exporter.url], 250)
    sampler = Sampler(src, 250)
    sampler.mark("serve")
    sampler.ingest(src.poll())
    exporter.page = PEAK
    sampler.ingest(src.poll())
    exporter.status = 500
    sampler.ingest(src.poll())
    exporter.status, exporter.page = 200, "# no GPU here\n"
    sampler.ingest(src.poll())
    track = sampler.figures()["127.0.0.1:0"]
    assert track.stages["serve"].samples == 2 and track.stages["serve"].min_free_mib == 60225.0
    assert sampler.missed == 1 and "HTTP 500" in sampler.missed_examples[0]
    gates, data = judged(sampler)
    reserve = next(g for g in gates if g.gate.startswith("reserve@"))
    assert reserve.verdict is Verdict.ERROR
    assert "no longer lists GPU 0" in reserve.reasons[0]
    assert data.power_field == POWER
    src.close()


def test_a_url_that_never_answers(exporter: FakeExporter) -> None:
    """One dead URL beside a live one: the live card is watched, the dead URL is a problem that
    makes the telemetry gate inconclusive; all URLs dead is DcgmUnavailable."""
    dead = "http://127.0.0.1:18602/metrics"
    src = DcgmSource([exporter.url, dead], 250, client=httpx.Client(timeout=0.5))
    assert [c.gpu for c in src.cards()] == ["127.0.0.1:18601:0"]
    assert "18602" in src.problems[0]
    sampler = Sampler(src, 250, problems=src.problems)
    sampler.mark("serve")
    sampler.ingest(src.poll())
    gates, _ = judged(sampler)
    assert [(g.gate, g.verdict) for g in gates] == [
        ("reserve@127.0.0.1:18601:0", Verdict.PASS),
        ("telemetry", Verdict.INCONCLUSIVE),
    ]
    src.close()
    with pytest.raises(DcgmUnavailable, match="did not answer at start"):
        DcgmSource([dead], 250)
