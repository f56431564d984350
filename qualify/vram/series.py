"""The time series of one card, kept as evidence, downsampled to fit the file size limit.

A row is `[t_s, stage, free_mib, used_mib, power_w, n]`. Downsampling merges runs of `n`
consecutive samples of one stage into one row that keeps the bucket's *minimum* free memory (at
the time it was seen), its maximum used memory and its maximum power, so the figures the policy
reads (each stage's lowest free memory, its peak power) survive any amount of merging.
"""

from __future__ import annotations

import json
import math
from typing import Any

Row = tuple[float, str, float, float | None, float | None, int]
COLUMNS = ["t_s", "stage", "free_mib", "used_mib", "power_w", "n"]
LIMIT = 1024 * 1024 - 64 * 1024  # under the evidence store's 1 MiB, with room for the header


def _max(a: float | None, b: float | None) -> float | None:
    if a is None:
        return b
    return a if b is None else max(a, b)


def merge(rows: list[Row]) -> Row:
    """One row for a bucket: the min-free sample's time, min free, max used, max power."""
    low = min(rows, key=lambda r: r[2])
    used: float | None = None
    power: float | None = None
    for r in rows:
        used, power = _max(used, r[3]), _max(power, r[4])
    return (low[0], low[1], low[2], used, power, sum(r[5] for r in rows))


def downsample(rows: list[Row], max_rows: int) -> list[Row]:
    """At most about `max_rows` rows (plus one per stage run); buckets never cross stages."""
    if len(rows) <= max_rows:
        return list(rows)
    k = math.ceil(len(rows) / max(1, max_rows))
    out: list[Row] = []
    bucket: list[Row] = []
    for r in rows:
        if bucket and (len(bucket) == k or bucket[-1][1] != r[1]):
            out.append(merge(bucket))
            bucket = []
        bucket.append(r)
    if bucket:
        out.append(merge(bucket))
    return out


def _line(r: Row) -> str:
    # Figures unrounded (JSON's shortest exact repr): a rounded minimum is a lost minimum.
    return json.dumps([round(r[0], 3), *r[1:]])


def encode(header: dict[str, Any], rows: list[Row], limit: int = LIMIT) -> bytes:
    """JSON lines: a header object, then one row per line; merged until it fits `limit`."""
    kept = rows
    while True:
        head = dict(header, columns=COLUMNS, samples=sum(r[5] for r in rows), rows=len(kept))
        head["downsampled"] = len(kept) < len(rows)
        body = "\n".join([json.dumps(head), *(_line(r) for r in kept)]) + "\n"
        data = body.encode()
        if len(data) <= limit or len(kept) <= 1:
            return data
        target = int(len(kept) * limit / len(data) * 0.9)
        fewer = downsample(rows, max(1, target))
        if len(fewer) >= len(kept):  # one row per stage run already: the store splits the rest
            return data
        kept = fewer


def decode(data: bytes) -> tuple[dict[str, Any], list[Row]]:
    """A series file back into its header and rows."""
    lines = data.decode().splitlines()
    header: dict[str, Any] = json.loads(lines[0])
    rows: list[Row] = [tuple(json.loads(line)) for line in lines[1:]]
    return header, rows
