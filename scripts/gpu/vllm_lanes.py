#!/usr/bin/env python3
"""Server lifetimes and GPU memory between lanes, from a launch-mode run's NVML telemetry.

    python3 scripts/gpu/vllm_lanes.py RUN_DIR

A server holds memory from its start to its stop: each stretch of samples with less than
`--free-mib` free (default: 1 GiB under the card's idle free memory) is one server's life. It
prints each stretch (start, end, seconds, least free MiB) and the free memory in each gap
between two stretches: memory given back when a lane stops and before the next starts.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main() -> None:
    run = Path(sys.argv[1])
    rows = []
    for f in sorted((run / "telemetry").glob("attempt-*/samples.*.jsonl")):
        for line in f.read_text().splitlines():
            v = json.loads(line)
            if isinstance(v, list):
                rows.append((float(v[0]), str(v[1]), float(v[3])))
    idle = max(r[2] for r in rows)
    limit = idle - 1024.0
    spans: list[list[float]] = []
    gaps: list[tuple[float, float, float]] = []
    for t, _stage, free in rows:
        held, open_ = free < limit, bool(spans) and spans[-1][1] is None
        if held and open_:
            spans[-1][2] = min(spans[-1][2], free)
        elif held:
            spans.append([t, None, free])  # type: ignore[list-item]
        elif open_:
            spans[-1][1] = t
            gaps.append((t, t, free))
        elif gaps:
            gaps[-1] = (gaps[-1][0], t, max(gaps[-1][2], free))
    print(f"idle free memory {idle:,.0f} MiB; a server holds memory below {limit:,.0f} MiB free")
    for i, (a, b, least) in enumerate(spans, 1):
        end = rows[-1][0] if b is None else b
        print(
            f"server {i}: t={a:7.1f}..{end:7.1f} s ({end - a:5.1f} s held), "
            f"least free {least:,.0f} MiB"
        )
    for i, (a, b, most) in enumerate(gaps[: len(spans) - 1], 1):
        print(
            f"gap {i}: t={a:7.1f}..{b:7.1f} s, free back to {most:,.0f} MiB "
            f"({idle - most:,.0f} MiB short of idle)"
        )


if __name__ == "__main__":
    main()
