"""The capacity stage's open-loop load on two Ray workers (`[stages.capacity.load] workers = 2`),
on a real local Ray cluster of two nodes, against the real local llama-server: every cell's
requests kept as its workers' shards, the figures computed over their union, the record the
stage seals equal to the one rebuilt from the shards (`stage_runs.StageRunner.rederived`, what
`verify` runs), and the decision's capacity section naming the workers.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from raycluster import local_cluster

from qualify.capacity.record import Record
from qualify.capacity.section import ray_rows

pytest.importorskip("qualify.capacity.rayload")

pytestmark = [pytest.mark.integration, pytest.mark.slow]

LOAD = (
    "load = { length = 128, start_rps = 1.0, step_s = 4, min_requests = 6, max_steps = 2, "
    "refine = 0, burst = 4, max_total_s = 90, workers = 2 }"
)


def test_the_load_runs_on_two_workers_and_verifies(
    candidate_factory: Callable[..., Path],
    stage_runner: Any,
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cand = candidate_factory(
        "ray",
        stages=["capacity"],
        replace={
            '"-c", "8192"': '"-c", "2048"',
            "lengths = [256, 2048]": "lengths = [128]",
            "concurrency = [1, 2]": "concurrency = [1]",
            'kinds = ["prose", "code", "json", "list"]': "kinds = []",
            "warmups = 1\nmax_tokens = 64": "warmups = 1\nmax_tokens = 16",
            re.search(r"(?m)^load = .*$", _example()).group(0): LOAD,  # type: ignore[union-attr]
            "soak = { rate_fraction = 0.75 }": "soak = { enabled = false }",
        },
    )
    # a short folder: Ray's unix sockets live under it (107 bytes at most for their paths)
    with local_cluster(tmp_path_factory.mktemp("ray")) as address:
        monkeypatch.setenv("QUALIFY_RAY_ADDRESS", address)
        runner = stage_runner(cand)
        result = runner.stage("capacity")  # asserts the rebuild from the shards equals it
    record = Record.model_validate(result.data)
    cells = record.load.cells
    assert cells and all(c.spread is not None for c in cells)
    for c in cells:
        assert c.spread is not None
        assert [w.worker for w in c.spread.workers] == [1, 2]
        assert len({w.node for w in c.spread.workers}) == 2
        assert c.spread.placement == "STRICT_SPREAD"
        for i, st in enumerate(c.streams):
            if st.files:
                assert re.search(rf"-w{i % 2 + 1}-s{i + 1}\.json$", st.files[0]), st.files[0]
        for w in c.spread.workers:
            assert w.uncertainty_ms is not None and w.offset_ms is not None
            print(
                f"{c.cell} worker {w.worker} {w.node[:8]}: offset {w.offset_ms:+.3f} ms "
                f"± {w.uncertainty_ms:.3f} ms, late {w.start_late_ms} ms, "
                f"lag p99 {w.lag.send_lag_ms_p99} ms, cpu {w.cpu_s} s; harness {c.harness_error}"
            )
    rows = ray_rows(cells)
    assert len(rows) == len(cells) and "worker 2 on" in rows[0]["workers"]


def _example() -> str:
    root = Path(__file__).resolve().parents[2]
    return (root / "examples" / "smollm2" / "candidate.toml").read_text()
