"""Write the two small traces shipped in traces/ (qualify's trace replay, docs/capacity.md).

- `traces/agent-tasks.jsonl`, qualify's own form: every quality task of gates/quality/ that asks
  one prompt, as one request of its own session (the task's id), its visible-token budget as
  `output_length`; the requests arrive in trains of two, 250 ms apart, a train every 2 s.
- `traces/mooncake-head.jsonl`, the Mooncake form: the first four rows of Mooncake's
  `mooncake_trace.jsonl` (kvcache-ai/Mooncake, commit d21da17, as reproduced in the trace-format
  section of NVIDIA Dynamo's benchmarks/data_generator/README.md), their lengths divided by 32 so
  that they fit a small model's window; the `hash_ids` are kept, so with `block_tokens = 16`
  each block is the original 512-token block scaled by the same factor.
- `traces/mooncake-conversation-21s.jsonl`, the Mooncake form: the first 21 s of Mooncake's
  `FAST25-release/traces/conversation_trace.jsonl` (kvcache-ai/Mooncake, commit 3b5a594; 71
  requests arriving in trains every 3 s), lengths divided by 16 so that the longest prompt fits
  an 8K window; replay it with `block_tokens = 32`. Written only when the published file is
  named: `python scripts/make_traces.py --conversation PATH`.

Run: `python scripts/make_traces.py` from the repository root.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
# timestamp (ms), input_length, output_length, hash_ids: the rows as published
MOONCAKE_HEAD = [
    (0, 6755, 500, list(range(0, 14))),
    (0, 7319, 490, [0, *range(14, 28)]),
    (3052, 7234, 794, [0, *range(28, 42)]),
    (3052, 2287, 316, [0, 42, 43, 44, 45]),
]
SCALE = 32
CONVERSATION_SCALE = 16
CONVERSATION_BEFORE_MS = 24_000


def agent_tasks() -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for path in sorted((ROOT / "gates" / "quality").glob("*.yaml")):
        gate = yaml.safe_load(path.read_text())
        params = gate.get("params") or {}
        prompt = params.get("prompt")
        if not isinstance(prompt, str):
            continue
        n = len(rows)
        rows.append(
            {
                "timestamp": (n // 2) * 2000 + (n % 2) * 250,
                "session": gate["id"],
                "messages": [{"role": "user", "content": prompt.strip()}],
                "output_length": int(params.get("visible_tokens") or 128),
            }
        )
    return rows


def mooncake_head() -> list[dict[str, object]]:
    return [
        {
            "timestamp": t,
            "input_length": max(1, i // SCALE),
            "output_length": max(1, o // SCALE),
            "hash_ids": ids,
        }
        for t, i, o, ids in MOONCAKE_HEAD
    ]


def conversation_head(path: Path) -> list[dict[str, object]]:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [
        {
            "timestamp": r["timestamp"],
            "input_length": max(1, r["input_length"] // CONVERSATION_SCALE),
            "output_length": max(1, r["output_length"] // CONVERSATION_SCALE),
            "hash_ids": r["hash_ids"],
        }
        for r in rows
        if r["timestamp"] < CONVERSATION_BEFORE_MS
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--conversation", type=Path, help="Mooncake's conversation_trace.jsonl")
    args = ap.parse_args()
    traces = [("agent-tasks", agent_tasks()), ("mooncake-head", mooncake_head())]
    if args.conversation:
        traces.append(("mooncake-conversation-21s", conversation_head(args.conversation)))
    for name, rows in traces:
        text = "".join(json.dumps(r) + "\n" for r in rows)
        (ROOT / "traces" / f"{name}.jsonl").write_text(text)


if __name__ == "__main__":
    main()
