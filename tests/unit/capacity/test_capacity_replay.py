"""Trace replay: the Mooncake form and qualify's own read, prompts synthesized so that shared
blocks are shared text, the schedule scaled, and `capacity-replay` fed a replayed answer that
breaks (fails), a clean replay (passes), a replay under the floor at the trace's own pace
(fails) and no trace (skipped)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from qualify.capacity import traffic_judges
from qualify.capacity.record import Record
from qualify.capacity.trace import (
    TraceError,
    arrivals,
    offsets_of,
    prompt_of,
    read_trace,
    trace_path,
)
from qualify.gates.thresholds import Thresholds
from qualify.records import Verdict

ROOT = Path(__file__).resolve().parents[3]
T = Thresholds()
P = traffic_judges.NoParams()
MOONCAKE = "\n".join(
    json.dumps(r)
    for r in (
        {"timestamp": 3052, "input_length": 40, "output_length": 8, "hash_ids": [0, 3, 4]},
        {"timestamp": 0, "input_length": 40, "output_length": 8, "hash_ids": [0, 1, 2]},
        {"timestamp": 0, "input_length": 20, "output_length": 8, "hash_ids": [0, 5]},
    )
)


def test_the_mooncake_form_reads_in_arrival_order_and_scales() -> None:
    rows = read_trace(MOONCAKE)
    assert [r.t_ms for r in rows] == [0, 0, 3052]
    assert offsets_of(rows, 1.0) == [0.0, 0.0, 3.052]
    assert offsets_of(rows, 2.0) == [0.0, 0.0, 1.526]


def test_shared_blocks_are_shared_text_and_lengths_are_kept() -> None:
    rows = read_trace(MOONCAKE)
    texts = [prompt_of(r, i, block_tokens=16)[0]["content"] for i, r in enumerate(rows)]
    blocks = [t.split("\n") for t in texts]
    assert blocks[0][0] == blocks[1][0] == blocks[2][0]  # block 0, shared
    assert blocks[0][1] != blocks[2][1]
    assert [len(b.split()) for b in blocks[0][:-1]] == [16, 16, 8]  # 40 words, last partial
    again = [prompt_of(r, i, block_tokens=16)[0]["content"] for i, r in enumerate(rows)]
    assert again == texts  # deterministic


def test_qualifys_own_form_carries_messages_and_sessions() -> None:
    line = {"timestamp": 5, "messages": [{"role": "user", "content": "hi"}], "session": "a"}
    (row,) = read_trace(json.dumps(line))
    assert row.session == "a" and prompt_of(row, 0) == [{"role": "user", "content": "hi"}]
    with pytest.raises(TraceError, match="neither messages nor input_length"):
        read_trace(json.dumps({"timestamp": 0}))
    with pytest.raises(TraceError, match="no timestamp"):
        read_trace(json.dumps({"input_length": 3}))


@pytest.mark.parametrize(
    "name", ["agent-tasks.jsonl", "mooncake-head.jsonl", "mooncake-conversation-21s.jsonl"]
)
def test_the_shipped_traces_read(name: str) -> None:
    rows = read_trace((ROOT / "traces" / name).read_text())
    assert len(rows) >= 4


def test_trace_arrivals_keep_the_trains_and_take_the_rate() -> None:
    rows = read_trace(MOONCAKE)  # two at 0, one at 3.052 s: a train of two, then a lull
    got = arrivals(rows, 2.0, 7)
    # the cycle's gaps: 0, 3.052, and their mean (1.526) back to the first; mean gap 1/2 s
    assert got[:4] == [0.0, 0.0, 1.0, 1.5] and got[4:] == [1.5, 2.5, 3.0]
    assert arrivals(rows, 4.0, 7) == [t / 2 for t in got]


def test_a_trace_that_spans_no_time_has_no_arrival_pattern() -> None:
    with pytest.raises(TraceError, match="spans no time"):
        arrivals(read_trace('{"timestamp": 0, "input_length": 4}'), 1.0, 3)


def test_load_arrival_trace_needs_a_replay_trace() -> None:
    from pydantic import ValidationError

    from qualify.capacity.settings import CapacitySettings

    with pytest.raises(ValidationError, match=r"expected replay\.trace"):
        CapacitySettings.model_validate({"load": {"arrival": "trace"}})
    ok = CapacitySettings.model_validate({"load": {"arrival": "trace"}, "replay": {"trace": "t"}})
    assert ok.model_dump()["load"]["arrival"] == "trace"
    assert "arrival" not in CapacitySettings().model_dump()["load"]


def cell(**kw: Any) -> dict[str, Any]:
    c: dict[str, Any] = {"label": "load-replay-1x", "cell": "replay-1x", "scale": 1.0}
    c |= {"requests": 4, "completed": 4, "good": 4, "goodput": 1.0, "trace": "t.jsonl"}
    c["streams"] = [{"completion_tokens": 8, "ttft_s": 0.1} for _ in range(4)]
    return c | kw


def judged(*cells: dict[str, Any]) -> list[Any]:
    data = {"load": {"replay": list(cells), "slo": {"goodput_floor": 0.9}}}
    return traffic_judges.replay(Record.model_validate(data), P, T)


def test_a_replayed_answer_that_breaks_fails_its_cell() -> None:
    broken = cell(broken=1)
    broken["streams"][2]["broken"] = ["invalid JSON: Expecting value"]
    ok, bad = judged(cell(), broken | {"cell": "replay-2x", "scale": 2.0})
    assert ok.verdict is Verdict.PASS and ok.part == "replay-1x"
    assert bad.verdict is Verdict.FAIL and bad.part == "replay-2x"
    assert bad.reasons == [
        "1 of 4 replayed requests gave a broken answer",
        "request 3: invalid JSON: Expecting value",
    ]


def test_goodput_under_the_floor_fails_at_its_own_pace_only() -> None:
    slow, fast = judged(cell(goodput=0.5), cell(goodput=0.5, scale=4.0, cell="replay-4x"))
    assert slow.verdict is Verdict.FAIL and "under the floor 90% at 1x" in slow.reasons[0]
    assert fast.verdict is Verdict.PASS


def test_no_trace_is_skipped_and_a_lagging_client_is_a_harness_error() -> None:
    (j,) = traffic_judges.replay(Record.model_validate({}), P, T)
    assert j.verdict is Verdict.SKIPPED
    (j,) = judged(cell(harness_error="p99 send lag 80 ms"))
    assert j.verdict is Verdict.ERROR


def test_the_load_table_and_diff_show_each_replay_cell() -> None:
    from qualify.capacity.section import diff_cells, load

    rec = Record.model_validate({"load": {"replay": [cell(good=3, goodput=0.75)]}})
    shown = load(rec, [])
    assert shown is not None
    (row,) = shown["cells"]
    assert row["cell"] == "replay-1x" and row["arrival"] == "trace t.jsonl"
    assert row["goodput"] == "75%" and row["requests"] == 4
    (c,) = [c for c in diff_cells(rec) if c.group == "capacity replay"]
    assert c.measures["goodput"].counts == (3, 4) and c.setting["scale"] == 1.0


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (None, "No such file or directory"),
        ('{"timestamp": 0, "input_length": 8}\n{"input_length": 8}\n', "line 2: no timestamp"),
        ("not json\n", "line 1: not JSON"),
    ],
)
def test_a_trace_that_does_not_read_stops_the_run_before_anything_is_sent(
    tmp_path: Path, body: str | None, said: str
) -> None:
    """`qualify run` and `qualify validate` check the trace first: one line naming the field,
    the file and what is wrong, exit 2, no evidence written."""
    import os
    import shutil
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[3]
    for name in ("candidate.toml", "control.toml"):
        shutil.copy(root / "examples" / "smollm2" / name, tmp_path / name)
    cand = tmp_path / "candidate.toml"
    text, replaced = re.subn(
        r"(?m)^replay = \{.*\}$", 'replay = { trace = "t.jsonl" }', cand.read_text()
    )
    assert replaced == 1, "the demo candidate replays a trace"
    cand.write_text(text)
    if body is not None:
        (tmp_path / "t.jsonl").write_text(body)
    env = {**os.environ, "PYTHONPATH": str(root)}
    for cmd in (["validate"], ["run", "--evidence", "ev"]):
        done = subprocess.run(
            [sys.executable, "-m", "qualify", cmd[0], "candidate.toml", *cmd[1:]],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 2, (done.stdout, done.stderr)
        (line,) = [ln for ln in done.stderr.splitlines() if "replay.trace" in ln]
        assert line.startswith("  stages.capacity.replay.trace: t.jsonl: ") and said in line
        assert not (tmp_path / "ev").exists()


def test_a_shipped_trace_is_named_by_its_name_alone(tmp_path: Path) -> None:
    """`shipped:<name>` is one of qualify's own traces wherever the candidate file is; any
    other name is a path beside the candidate."""
    root = Path(__file__).resolve().parents[3]
    got = trace_path(tmp_path, "shipped:mooncake-head.jsonl")
    assert got == root / "traces" / "mooncake-head.jsonl" and got.is_file()
    assert trace_path(tmp_path, "mine/t.jsonl") == tmp_path / "mine" / "t.jsonl"
    assert trace_path(tmp_path, "mooncake-head.jsonl") == tmp_path / "mooncake-head.jsonl"


def test_a_shipped_trace_that_is_not_shipped_stops_validate(tmp_path: Path) -> None:
    """`shipped:<name>` naming no shipped trace: one line naming the field and where it looked,
    exit 2, nothing written."""
    import os
    import shutil
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[3]
    for name in ("candidate.toml", "control.toml"):
        shutil.copy(root / "examples" / "smollm2" / name, tmp_path / name)
    cand = tmp_path / "candidate.toml"
    cand.write_text(cand.read_text().replace("shipped:mooncake-head.jsonl", "shipped:nope.jsonl"))
    env = {**os.environ, "PYTHONPATH": str(root)}
    done = subprocess.run(
        [sys.executable, "-m", "qualify", "validate", "candidate.toml"],
        cwd=tmp_path, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 2, (done.stdout, done.stderr)
    (line,) = [ln for ln in done.stderr.splitlines() if "replay.trace" in ln]
    assert f"{root / 'traces' / 'nope.jsonl'}: No such file" in line and "JSONL trace" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["candidate.toml", "control.toml"]
