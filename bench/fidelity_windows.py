"""Which client decode window agrees with the server's histograms: the ratio (client decode tok/s
over the server's, per timed run of a capacity attempt) under two windows, from the kept
exchanges and the kept server window of each run.

- first: (n - 1) tokens over first token -> last token, what `qualify.httpclient.timing` uses;
- second: (n - tokens through the second token chunk) over that chunk -> last token, which needs
  the running token count on every chunk (`stream_options.continuous_usage_stats`).

    python bench/fidelity_windows.py EVIDENCE/<candidate>/<run>/capacity/attempt-001

prints one line a run and, for c=1 and c>1, the median and range of each ratio.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

from qualify.httpclient.chat import ChatOutcome, from_stream
from qualify.httpclient.client import Exchange, SSEEvent
from qualify.httpclient.timing import generation_end


def outcome(path: Path) -> ChatOutcome:
    sse = json.loads(path.read_text())["response"]["sse"] or []
    events = [SSEEvent(t=t, event=e, data=d) for t, e, d in sse]
    return from_stream(Exchange("POST", "", {}, {}, status=200, events=events))


def counts(path: Path) -> list[int]:
    """The running completion_tokens of each token-bearing chunk (continuous usage)."""
    out = []
    for _, _, data in json.loads(path.read_text())["response"]["sse"] or []:
        if data.strip() == "[DONE]":
            continue
        chunk = json.loads(data)
        delta = ((chunk.get("choices") or [{}])[0] or {}).get("delta") or {}
        if delta.get("content") or delta.get("reasoning_content") or delta.get("tool_calls"):
            out.append((chunk.get("usage") or {}).get("completion_tokens"))
    return out


def ratios(attempt: Path, run: dict) -> tuple[float, float] | None:
    window = ((run.get("server_window") or {}).get("window")) or {}
    server = window.get("decode_tok_s")
    if not server:
        return None
    first_n = first_s = second_n = second_s = 0.0
    for stream in run["streams"]:
        path = attempt / stream["files"][0]
        o, c = outcome(path), counts(path)
        end, n = generation_end(o), o.completion_tokens
        if end is None or not n or len(o.token_chunk_times) < 2 or len(c) < 2 or c[1] is None:
            return None
        first_n, first_s = first_n + n - 1, first_s + end - o.token_chunk_times[0]
        second_n, second_s = second_n + n - c[1], second_s + end - o.token_chunk_times[1]
    return first_n / first_s / server, second_n / second_s / server


def main(attempt: Path) -> None:
    result = json.loads((attempt / "result.json").read_text())["data"]
    by_c: dict[str, list[tuple[float, float]]] = {"c=1": [], "c>1": []}
    for row in result["matrix"]:
        for run in row["run_records"]:
            r = ratios(attempt, run)
            if r is None:
                continue
            by_c["c=1" if row["concurrency"] == 1 else "c>1"].append(r)
            print(f"{run['label']}: first {r[0]:.3f}  second {r[1]:.3f}")
    for key, rs in by_c.items():
        for i, name in enumerate(("first", "second")):
            xs = [r[i] for r in rs]
            if xs:
                print(
                    f"{key} {name}: median {statistics.median(xs):.3f}, "
                    f"range {min(xs):.3f}-{max(xs):.3f}, {len(xs)} runs"
                )


if __name__ == "__main__":
    main(Path(sys.argv[1]))
