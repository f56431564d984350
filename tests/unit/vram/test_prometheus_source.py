"""The Prometheus source on answers shaped as Prometheus documents them (HTTP API, instant
query: `{"status":"success","data":{"resultType":"vector","result":[{"metric":{...},
"value":[<unix time>,"<value>"]}]}}`; errors: `{"status":"error","errorType":"bad_data",
"error":"..."}`). The real server is in tests/integration/test_prometheus.py."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest

from qualify.vram.prometheus import PrometheusSource, PrometheusUnavailable, query, samples
from qualify.vram.settings import VramSettings


def _series(name: str, host: str, gpu: str, value: str, t: float) -> dict[str, Any]:
    return {
        "metric": {
            "__name__": name, "Hostname": host, "gpu": gpu, "UUID": f"GPU-{host}-{gpu}",
            "modelName": "NVIDIA H200", "instance": "10.0.0.1:9400", "job": "dcgm",
        },
        "value": [t, value],
    }  # fmt: skip


def _answer(free: dict[str, str], t: float) -> dict[str, Any]:
    result = []
    for card, value in free.items():
        host, gpu = card.split(":")
        result.append(_series("DCGM_FI_DEV_FB_FREE", host, gpu, value, t))
        result.append(_series("DCGM_FI_DEV_FB_USED", host, gpu, "40000", t))
        result.append(_series("DCGM_FI_DEV_POWER_USAGE", host, gpu, "NaN", t))
    return {"status": "success", "data": {"resultType": "vector", "result": result}}


class Server:
    def __init__(self) -> None:
        self.answers: list[dict[str, Any]] = []
        self.queries: list[str] = []

    def handle(self, req: httpx.Request) -> httpx.Response:
        self.queries.append(req.url.params["query"])
        body = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        return httpx.Response(200 if body.get("status") == "success" else 400, json=body)


def _source(server: Server, selector: str = "") -> PrometheusSource:
    client = httpx.Client(transport=httpx.MockTransport(server.handle))
    return PrometheusSource("http://prom:9090/", 1000, selector, client)


def test_cards_are_node_and_gpu() -> None:
    srv = Server()
    srv.answers = [_answer({"b:0": "1000", "a:1": "2000", "a:0": "3000"}, time.time())]
    src = _source(srv, 'Hostname=~"a|b"')
    assert [c.gpu for c in src.cards()] == ["a:0", "a:1", "b:0"]
    assert src.cards()[0].uuid == "GPU-a-0" and src.cards()[0].total_mib == 43000
    assert srv.queries[0].endswith(', Hostname=~"a|b"}')
    assert srv.queries[0].startswith('{__name__=~"DCGM_FI_DEV_FB_FREE|')


def test_same_scrape_counts_once_and_a_vanished_card_is_lost() -> None:
    srv = Server()
    t = time.time() - 2.0
    first = _answer({"a:0": "3000", "a:1": "2000"}, t)
    srv.answers = [first, first, first, _answer({"a:0": "2500"}, t + 1)]
    src = _source(srv)
    one = src.poll()
    assert sorted(r.gpu for r in one.readings) == ["a:0", "a:1"]
    assert one.readings[0].power_w is None  # NaN is no reading
    assert one.readings[0].t < time.monotonic() - 1.5  # filed at its scrape time
    assert src.poll().readings == []  # the same scrape again
    last = src.poll()
    assert [(r.gpu, r.free_mib) for r in last.readings] == [("a:0", 2500.0)]
    assert [x.gpu for x in last.lost] == ["a:1"]
    assert src.poll().lost == []  # lost once


def test_error_answers_are_missed_polls_and_start_failures() -> None:
    bad = {"status": "error", "errorType": "bad_data", "error": "parse error at char 3"}
    srv = Server()
    srv.answers = [bad]
    with pytest.raises(PrometheusUnavailable, match="parse error at char 3"):
        _source(srv)
    srv.answers = [{"status": "success", "data": {"resultType": "vector", "result": []}}]
    with pytest.raises(PrometheusUnavailable, match="matched no GPU"):
        _source(srv)
    srv.answers = [_answer({"a:0": "1"}, time.time()), bad]
    src = _source(srv)
    poll = src.poll()
    assert poll.readings == [] and "bad_data" not in poll.missed[0]
    assert "parse error" in poll.missed[0]


def test_matrix_answer_is_refused() -> None:
    with pytest.raises(ValueError, match="vector"):
        samples({"status": "success", "data": {"resultType": "matrix", "result": []}})
    assert query() == (
        '{__name__=~"DCGM_FI_DEV_FB_FREE|DCGM_FI_DEV_FB_USED|DCGM_FI_DEV_FB_RESERVED|'
        'DCGM_FI_DEV_POWER_USAGE"}'
    )


def test_settings_need_the_url() -> None:
    with pytest.raises(ValueError, match="prometheus_url"):
        VramSettings(source="prometheus")
    assert VramSettings(source="prometheus", prometheus_url="http://p:9090").prometheus_url
