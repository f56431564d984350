"""The driver's side of open-loop cells on Ray workers (`qualify.capacity.spread`), without Ray:
the split, the shard names, the clock probe, the merge, the harness verdicts, the settings and
the decision's rows. The real cluster: tests/integration/test_capacity_ray.py."""

from __future__ import annotations

import asyncio
from typing import Any

from qualify.capacity.loads import OpenCell
from qualify.capacity.openloop import OpenLoopRun, Plan, Sent, poisson, send, window
from qualify.capacity.section import ray_rows
from qualify.capacity.settings import CapacitySettings, LoadSettings
from qualify.capacity.shard import ShardResult, split
from qualify.capacity.spread import (
    FLEET,
    Broken,
    SpreadRun,
    Worker,
    address,
    annotate,
    best_probe,
    chosen,
    merge,
    open_fleet,
    shard_label,
    shard_name,
)
from qualify.gates.thresholds import Thresholds
from qualify.httpclient.client import Exchange


def test_one_schedule_split_by_index() -> None:
    assert split(7, 3) == [[0, 3, 6], [1, 4], [2, 5]]
    assert sorted(i for s in split(40, 4) for i in s) == list(range(40))


def test_each_worker_keeps_its_own_shard_of_the_exchanges() -> None:
    assert shard_label("load-poisson-2rps-s5", 4, 2) == "load-poisson-2rps-w1-s5"
    assert shard_label("load-incumbent-poisson-0.5rps-s2", 1, 3) == (
        "load-incumbent-poisson-0.5rps-w2-s2"
    )
    one = OpenLoopRun([], 0.0, None)
    assert shard_name(one, "load-burst-8-s3", 2) == "load-burst-8-s3"
    two = SpreadRun([], 0.0, None, spread={"workers": [{}, {}]})
    assert shard_name(two, "load-burst-8-s3", 2) == "load-burst-8-w1-s3"


def test_the_probe_of_least_round_trip_gives_offset_and_uncertainty() -> None:
    probes = [
        {"sent_s": 10.0, "worker_s": 110.004, "back_s": 10.010},
        {"sent_s": 11.0, "worker_s": 111.0015, "back_s": 11.002},  # 2 ms round trip
        {"sent_s": 12.0, "worker_s": 112.1, "back_s": 12.2},
    ]
    offset, unc = best_probe(probes)
    assert abs(offset - 100.0005) < 1e-9 and abs(unc - 0.001) < 1e-9


def _ex(i: int, t_end: float = 0.5) -> Exchange:
    return Exchange("POST", "u", {}, {"i": i}, t_sent=0.0, status=200, t_end=t_end)


def _result(indices: list[int], sent: list[float]) -> ShardResult:
    return ShardResult(indices, list(sent), [None] * len(indices), [], [1.0], 0.001, 0.2, 3.0)


def test_merged_in_the_schedule_order_and_a_lost_workers_requests_named() -> None:
    offsets = [0.0, 0.1, 0.2, 0.3]
    w1 = Worker(0, {"node": "a" * 56, "host": "h1"}, [0, 2])
    w1.result = _result([0, 2], [0.001, 0.201])
    w2 = Worker(1, {"node": "b" * 56, "host": "h2"}, [1, 3], lost="ActorDiedError: gone")
    received = {0: _ex(0), 2: _ex(2), 1: _ex(1)}
    received[1].t_sent = 100.1
    sent = merge(offsets, [w1, w2], received, start=100.0)
    assert [s.planned_s for s in sent] == offsets
    assert [s.exchange.request_body["i"] if s.exchange else None for s in sent] == [0, 1, 2, None]
    assert sent[1].sent_s is not None and abs(sent[1].sent_s - 0.1) < 1e-9
    assert sent[3].unfinished == "worker 2 lost mid-cell: ActorDiedError: gone"
    assert window(sent, 9.0) == 9.0  # an unfinished request: the time the cell ran
    assert abs((window(sent[:3], 9.0) or 0) - 0.701) < 1e-9


def _spread_run(lag_p99: float, lost: str | None = None) -> SpreadRun:
    w = {"worker": 2, "node": "c0ffee00" + "0" * 48, "host": "n2", "lost": lost}
    w["lag"] = {"send_lag_ms_p99": lag_p99, "loop_oversleep_ms_p99": 1.0}
    ok = {"worker": 1, "node": "a" * 56, "host": "n1", "lag": {"send_lag_ms_p99": 1.0}}
    return SpreadRun([], 0.0, None, spread={"workers": [ok, w]})


def test_a_worker_behind_is_a_harness_error_naming_it() -> None:
    cell = annotate({"harness_error": None}, _spread_run(450.0), 200.0)
    assert cell["harness_error"] == (
        "worker 2 on node c0ffee00 (n2) fell behind: the client sent requests late: "
        "send_lag_ms_p99 450.0 ms > 200 ms"
    )
    assert annotate({"harness_error": None}, _spread_run(5.0), 200.0)["harness_error"] is None
    one = OpenLoopRun([], 0.0, None)
    assert annotate({"harness_error": None}, one, 200.0) == {"harness_error": None}


def test_a_lost_worker_outranks_the_lag() -> None:
    run = _spread_run(450.0)
    run.harness = "worker 2 on node c0ffee00 (n2) was lost mid-cell (gone)"
    assert annotate({}, run, 200.0)["harness_error"] == run.harness


def test_without_a_fleet_the_one_process_sender_is_chosen() -> None:
    assert chosen(send) is send
    fleet = Broken("auto", "no cluster")
    token = FLEET.set(fleet)
    try:
        assert chosen(send) == fleet.send
        run = asyncio.run(fleet.send(None, Plan([{}, {}], [0.0, 0.5], 1.0)))
    finally:
        FLEET.reset(token)
    assert isinstance(run, SpreadRun) and run.harness == "no cluster"
    assert [s.unfinished for s in run.sent] == ["never sent: no cluster"] * 2


def test_no_cluster_makes_every_cell_a_harness_error(monkeypatch: Any) -> None:
    monkeypatch.setenv("QUALIFY_RAY_ADDRESS", "ray://127.0.0.1:1")
    assert address("auto") == "ray://127.0.0.1:1"
    monkeypatch.delenv("QUALIFY_RAY_ADDRESS")
    assert address(None) == "auto"
    monkeypatch.setattr("qualify.capacity.rayload.RayFleet.open", _refuse)
    fleet = open_fleet("auto", 2, Thresholds())
    assert isinstance(fleet, Broken) and "no 2 Ray workers at auto" in fleet.why


def _refuse(*a: Any) -> Any:
    raise ConnectionError("no cluster here")


def test_one_worker_writes_the_settings_earlier_builds_wrote() -> None:
    dumped = CapacitySettings().model_dump(mode="json")["load"]
    assert "workers" not in dumped and "ray_address" not in dumped
    two = LoadSettings(workers=2).model_dump(mode="json")
    assert two["workers"] == 2 and two["ray_address"] is None


def test_the_decision_names_workers_nodes_lag_and_uncertainty() -> None:
    cell = OpenCell.model_validate(
        {
            "cell": "poisson-2rps",
            "spread": {
                "placement": "STRICT_SPREAD",
                "uncertainty_ms": 0.9,
                "uncertainty_bound_ms": 20.0,
                "workers": [
                    {
                        "worker": 1,
                        "node": "abcdef0123",
                        "host": "n1",
                        "offset_ms": 0.01,
                        "uncertainty_ms": 0.9,
                        "lag": {"send_lag_ms_p99": 1.5},
                        "cpu_s": 0.25,
                    },
                    {"worker": 2, "node": "99", "lost": "ActorDiedError"},
                ],
            },
        }
    )
    (row,) = ray_rows([cell, OpenCell(cell="burst-8")])
    assert row == {
        "cell": "poisson-2rps",
        "uncertainty": "0.90 ms (bound 20.00 ms)",
        "placement": "STRICT_SPREAD",
        "workers": "worker 1 on abcdef01 (n1): offset +0.01 ms ± 0.90 ms, lag p99 1.50 ms, "
        "0.25 s CPU; worker 2 on 99: lost (ActorDiedError)",
    }


def test_the_union_lag_is_one_process_lag_over_every_request() -> None:
    sent = [Sent(p, p + 0.001) for p in poisson(5, 10, 1)]
    run = SpreadRun(sent, 0.0, None, [2.0, 3.0])
    assert run.lag() == OpenLoopRun(sent, 0.0, None, [2.0, 3.0]).lag()
