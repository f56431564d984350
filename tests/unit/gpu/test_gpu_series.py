"""Series evidence: downsampled to fit the 1 MiB limit without losing a minimum or a peak."""

from __future__ import annotations

from gpu_recorded import proof

from qualify.evidence.store import MAX_FILE_BYTES
from qualify.vram.series import Row, decode, downsample, encode


def _h200_rows() -> list[Row]:
    rows = proof()["sources"]["nvml"]["cards"]["0"]["rows"]
    return [tuple(r) for r in rows]  # type: ignore[misc]


def _long(repeat: int) -> list[Row]:
    """The H200 run stretched: each sample repeated `repeat` times, 1 ms apart, with a dip of
    one sample (the true minimum) in the middle of every stage."""
    out: list[Row] = []
    for t, stage, free, used, power, n in _h200_rows():
        for i in range(repeat):
            out.append((t + i / 1000, stage, free, used, power, n))
    by_stage: dict[str, list[int]] = {}
    for i, r in enumerate(out):
        by_stage.setdefault(r[1], []).append(i)
    for idx in by_stage.values():
        mid = idx[len(idx) // 2]
        t, stage, free, used, power, n = out[mid]
        out[mid] = (t, stage, free - 777.0, used, (power or 0) + 55.0, n)
    return out


def _per_stage(rows: list[Row]) -> dict[str, tuple[float, float | None, int]]:
    out: dict[str, tuple[float, float | None, int]] = {}
    for r in rows:
        low, peak, n = out.get(r[1], (float("inf"), None, 0))
        peak = r[4] if peak is None or (r[4] is not None and r[4] > peak) else peak
        out[r[1]] = (min(low, r[2]), peak, n + r[5])
    return out


def test_short_series_is_kept_whole() -> None:
    """The H200 run (99 samples) is written as it was, every sample a row."""
    rows = _h200_rows()
    header, back = decode(encode({"gpu": "0"}, rows))
    assert not header["downsampled"] and len(back) == len(rows) == header["samples"]


def test_long_series_fits_and_keeps_every_stage_minimum_and_peak() -> None:
    """400,000 samples (about 20 MiB as rows) come back under 1 MiB with each stage's lowest free
    memory, highest power and sample count intact."""
    rows = _long(4_000)
    data = encode({"gpu": "0"}, rows)
    assert len(data) <= MAX_FILE_BYTES
    header, back = decode(data)
    assert header["downsampled"] and header["samples"] == len(rows)
    assert _per_stage(back) == _per_stage(rows)


def test_buckets_never_cross_stages() -> None:
    """A merged row holds samples of one stage only, so a stage's minimum stays in that stage."""
    rows = _long(50)
    merged = downsample(rows, 40)
    assert len(merged) < len(rows)
    assert _per_stage(merged) == _per_stage(rows)
