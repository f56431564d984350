"""Two cards, one model split over both: the reserve is judged per card (issue: two H200s).

No machine with two GPUs was lent, so the H200's recorded NVML run is replayed as two cards:
card 0 as recorded, card 1 the same series shifted down, as an uneven `--tensor-split` leaves
one card fuller than the other. Exactly the fuller card fails, and the reason names it, the
stage and by how much.
"""

from __future__ import annotations

from typing import Any

from gpu_fakes import ReplayNvml
from gpu_recorded import baseline, judged, nvml_records, proof, stage_starts

from qualify.records import Verdict
from qualify.vram.nvml import NvmlSource
from qualify.vram.sampler import Sampler

MIB = 1024 * 1024


def _two_card_sampler(shift_mib: float) -> Sampler:
    one = nvml_records()
    two: list[dict[str, Any]] = []
    for r in one:
        two.append(r)
        shifted = dict(r, gpu="1")
        shifted["free"] = r["free"] - int(shift_mib * MIB)
        shifted["used"] = r["used"] + int(shift_mib * MIB)
        two.append(shifted)
    card = baseline()[0]
    info = {
        "0": {"name": card["name"], "uuid": card["uuid"]},
        "1": {"name": card["name"], "uuid": card["uuid"].replace("-", "-1", 1)},
    }
    nv = ReplayNvml(two, info)
    src = NvmlSource(nvml=nv, clock=nv.clock)
    nv.started = True
    rows0 = next(iter(proof()["sources"]["nvml"]["cards"].values()))["rows"][0]
    sampler = Sampler(src, 250)
    for stage, at in stage_starts("nvml", one[0]["t"] - rows0[0]):
        sampler.mark(stage, at=at)
    for _ in one:
        sampler.ingest(src.poll())
    return sampler


def test_even_split_both_cards_keep_the_reserve() -> None:
    gates, data = judged(_two_card_sampler(shift_mib=1024), 3.0)
    verdicts = {g.gate: g.verdict for g in gates}
    assert verdicts["reserve@0"] is Verdict.PASS and verdicts["reserve@1"] is Verdict.PASS
    assert [c.gpu for c in data.cards] == ["0", "1"]


def test_uneven_split_fails_exactly_the_fuller_card_and_says_which() -> None:
    # Card 0's lowest free is 60,225 MiB (the 80 GiB step); 58,000 MiB more on card 1 leaves
    # it 2,225 MiB there, under the 3 GiB reserve, and above it in every other stage.
    gates, data = judged(_two_card_sampler(shift_mib=58_000), 3.0)
    by = {g.gate: g for g in gates}
    assert by["reserve@0"].verdict is Verdict.PASS
    assert by["reserve@1"].verdict is Verdict.FAIL
    (why,) = by["reserve@1"].reasons
    assert "GPU 1" in why and "stage alloc-80GiB" in why and "2,225 MiB" in why
    assert by["reserve@1"].metrics["worst_stage"] == "alloc-80GiB"
    lows = {c.gpu: c.stages["alloc-80GiB"].min_free_mib for c in data.cards}
    assert lows["0"] - lows["1"] == 58_000
