"""Cluster telemetry: DCGM exporter series read back through a Prometheus server's HTTP API.

For a server that spans machines, every node's `dcgm-exporter` is already scraped by the
cluster's Prometheus; this source asks that server instead of each exporter. One instant query
per poll (`GET /api/v1/query`) fetches free, used and reserved framebuffer memory and power of
every GPU the selector matches:

    {__name__=~"DCGM_FI_DEV_FB_FREE|DCGM_FI_DEV_FB_USED|...", <selector>}

A card is one (`Hostname`, `gpu`) pair of dcgm-exporter's labels, keyed `<Hostname>:<gpu>`, so
the vram gates judge, and the decision shows, each card of each node (`vram-reserve@node-a:1`);
its `UUID` label is kept. A sample counts once, at the time Prometheus scraped it: a poll that
finds the same scrape again adds nothing, and a sample's wall-clock timestamp is mapped onto
the monotonic clock, so it is filed under the stage that was running when it was measured.
`interval_ms` should therefore be the Prometheus scrape interval; a scrape that did not come is
a gap. A failed query is a missed poll; a card that a later, successful query no longer lists
(Prometheus marks the series stale when the exporter stops exposing it) is lost.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import httpx

from qualify.vram.dcgm import FREE, POWER, RESERVED, USED
from qualify.vram.readings import Card, Lost, Poll, Reading, number

SERIES = (FREE, USED, RESERVED, POWER)
QUERY_PATH = "/api/v1/query"


class PrometheusUnavailable(Exception):
    """The Prometheus server did not answer the query, or matched no GPU: the reason."""


def query(selector: str = "") -> str:
    """The PromQL instant query for every series this source reads, narrowed by `selector`
    (label matchers, e.g. `Hostname=~"node-a|node-b"`)."""
    names = "|".join(SERIES)
    return f'{{__name__=~"{names}"{", " + selector if selector else ""}}}'


@dataclass
class Sample:
    """One scrape of one card, from the query's vector."""

    t_wall: float
    free: float | None = None
    used: float | None = None
    reserved: float | None = None
    power: float | None = None
    name: str = ""
    uuid: str | None = None

    @property
    def total_mib(self) -> float:
        """Free, used and reserved; 0 where free or used is missing."""
        if self.free is None or self.used is None:
            return 0.0
        return self.free + self.used + (self.reserved or 0.0)


def samples(body: object) -> dict[str, Sample]:  # raw server JSON
    """The vector of one `/api/v1/query` answer, by card; ValueError when it is not one."""
    if not isinstance(body, dict) or body.get("status") != "success":
        err = body.get("error") if isinstance(body, dict) else None
        raise ValueError(f"the query did not succeed: {err or str(body)[:200]}")
    data = body.get("data") or {}
    if data.get("resultType") != "vector":
        raise ValueError(f"expected a vector result (got {data.get('resultType')!r})")
    out: dict[str, Sample] = {}
    field = {FREE: "free", USED: "used", RESERVED: "reserved", POWER: "power"}
    for item in data.get("result") or []:
        metric, value = item.get("metric") or {}, item.get("value") or []
        # the card `<Hostname>:<gpu>`; the exporter's `instance` stands in for a missing Hostname
        host, gpu = metric.get("Hostname") or metric.get("instance"), metric.get("gpu")
        name = field.get(metric.get("__name__", ""))
        if host is None or gpu is None or name is None or len(value) != 2:
            continue
        s = out.setdefault(f"{host}:{gpu}", Sample(float(value[0])))
        s.t_wall = max(s.t_wall, float(value[0]))
        setattr(s, name, number(str(value[1])))
        s.name = s.name or metric.get("modelName", "")
        s.uuid = s.uuid or metric.get("UUID")
    return out


def _sort_key(gpu: str) -> tuple[str, int, str]:
    host, _, idx = gpu.rpartition(":")
    return (host, len(idx), idx)


class PrometheusSource:
    """Every GPU of every node a Prometheus server scrapes dcgm-exporter from."""

    name = "prometheus"
    power_field = POWER

    def __init__(
        self,
        url: str,
        interval_ms: int,
        selector: str = "",
        client: httpx.Client | None = None,
    ) -> None:
        timeout = max(0.5, min(5.0, interval_ms / 1000 * 0.8))
        self.http = client or httpx.Client(timeout=timeout)
        self.url = url.rstrip("/") + QUERY_PATH
        self.promql = query(selector)
        self.memory_info = f"{FREE}/{USED} (MiB) via Prometheus {url.rstrip('/')}"
        self.problems: list[str] = []
        self.last: dict[str, float] = {}
        got = self._query()
        if isinstance(got, str):
            raise PrometheusUnavailable(f"{self.url} {got}")
        listed = {k: s for k, s in got.items() if s.free is not None}
        if not listed:
            raise PrometheusUnavailable(
                f"{self.url} matched no GPU with {FREE} for the query {self.promql}"
            )
        self._cards = [
            Card(gpu=k, name=s.name, total_mib=s.total_mib, uuid=s.uuid)
            for k, s in sorted(listed.items(), key=lambda kv: _sort_key(kv[0]))
        ]
        self.seen = {c.gpu for c in self._cards}

    def _query(self) -> dict[str, Sample] | str:
        try:
            resp = self.http.get(self.url, params={"query": self.promql})
        except httpx.HTTPError as exc:
            return f"did not answer: {type(exc).__name__}: {exc}"
        try:
            body = resp.json()
        except ValueError:
            return f"answered HTTP {resp.status_code}, not JSON"
        try:
            return samples(body)
        except ValueError as exc:
            return f"answered HTTP {resp.status_code}: {exc}"

    def cards(self) -> list[Card]:
        return list(self._cards)

    def poll(self) -> Poll:
        out = Poll([], [], [])
        got = self._query()
        mono, wall = time.monotonic(), time.time()
        if isinstance(got, str):
            out.missed.append(f"{self.url} {got}")
            return out
        for gpu in sorted(self.seen):
            s = got.get(gpu)
            if s is None or s.free is None:
                why = f"Prometheus no longer has {FREE} of GPU {gpu} ({self.promql})"
                out.lost.append(Lost(gpu, mono, why))
                continue
            if self.last.get(gpu) == s.t_wall:
                continue  # the same scrape as last time: no new sample
            self.last[gpu] = s.t_wall
            t = mono - max(0.0, wall - s.t_wall)
            out.readings.append(Reading(gpu, t, s.free, s.used, s.power))
        self.seen -= {lost.gpu for lost in out.lost}
        return out

    def close(self) -> None:
        self.http.close()
