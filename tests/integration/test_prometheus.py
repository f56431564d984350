"""The Prometheus telemetry source against a real Prometheus server (Debian's `prometheus`).

Two small exporters on loopback serve dcgm-exporter text (`qualify.vram.dcgm.render`) for two
nodes with two GPUs each, with values the test sets; a real Prometheus, on loopback with a temp
config and TSDB, scrapes them every second; the source reads them back through `/api/v1/query`,
and the vram gates judge each card of each node.
"""

from __future__ import annotations

import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from qualify.gates.thresholds import Thresholds
from qualify.records import Verdict
from qualify.serving.process import free_port
from qualify.vram.dcgm import render
from qualify.vram.judges import ReserveParams, reserve
from qualify.vram.prometheus import PrometheusSource
from qualify.vram.record import Record
from qualify.vram.sampler import Sampler
from qualify.vram.series import figures

pytestmark = [pytest.mark.integration, pytest.mark.serverless]
BINARY = shutil.which("prometheus") or (
    "/usr/bin/prometheus" if Path("/usr/bin/prometheus").is_file() else None
)


def _card(gpu: int, free: float) -> dict[str, object]:
    return {
        "gpu": gpu, "uuid": f"GPU-{gpu:08d}-aaaa", "pci_bus_id": f"00000000:0{gpu}:00.0",
        "name": "NVIDIA H200", "free": free, "used": 143771 - free, "reserved": 613, "power": 400.5,
    }  # fmt: skip


class Exporter:
    """One node's dcgm-exporter: `cards` is what its next scrape shows."""

    def __init__(self, hostname: str) -> None:
        self.hostname = hostname
        self.cards: list[dict[str, object]] = [_card(0, 100_000), _card(1, 100_000)]
        me = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = render(me.cards, me.hostname, "570.86.15").encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.target = f"127.0.0.1:{self.server.server_address[1]}"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[str, dict[str, Exporter]]]:
    if BINARY is None:
        pytest.skip("the prometheus binary is absent (Debian: apt-get install -y prometheus)")
    nodes = {h: Exporter(h) for h in ("node-a", "node-b")}
    targets = ", ".join(f"'{e.target}'" for e in nodes.values())
    (tmp_path / "prometheus.yml").write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        f"scrape_configs:\n  - job_name: dcgm\n    static_configs:\n      - targets: [{targets}]\n"
    )
    port = free_port()
    log = (tmp_path / "prometheus.log").open("wb")
    proc = subprocess.Popen(
        [
            BINARY,
            f"--config.file={tmp_path / 'prometheus.yml'}",
            f"--storage.tsdb.path={tmp_path / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=log,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        _until(lambda: _count(url) == 16, "Prometheus never held all 16 series")
        yield url, nodes
    finally:
        proc.terminate()
        proc.wait(30)
        log.close()
        for e in nodes.values():
            e.server.shutdown()
            e.server.server_close()


def _count(url: str) -> int:
    try:
        r = httpx.get(f"{url}/api/v1/query", params={"query": '{__name__=~"DCGM_.*"}'})
        return len(r.json()["data"]["result"])
    except (httpx.HTTPError, ValueError, KeyError):
        return -1


def _until(cond: Any, why: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.2)
    pytest.fail(why)


def test_every_card_of_every_node_through_a_real_prometheus(
    cluster: tuple[str, dict[str, Exporter]],
) -> None:
    url, nodes = cluster
    src = PrometheusSource(url, 1000)
    cards = src.cards()
    assert [c.gpu for c in cards] == ["node-a:0", "node-a:1", "node-b:0", "node-b:1"]
    assert cards[0].name == "NVIDIA H200" and cards[0].uuid == "GPU-00000000-aaaa"
    assert cards[0].total_mib == 143771 + 613

    sampler = Sampler(src, 1000)
    sampler.mark("context")
    nodes["node-b"].cards[1] = _card(1, 2_000)  # below a 3 GiB reserve on one card of one node
    got: dict[str, float] = {}

    def low_seen() -> bool:
        poll = src.poll()
        sampler.ingest(poll)
        got.update({r.gpu: r.free_mib for r in poll.readings})
        return got.get("node-b:1") == 2_000

    _until(low_seen, "the new free memory never came back through Prometheus")
    assert got["node-a:1"] == 100_000

    nodes["node-a"].cards.pop()  # node-a's GPU 1 is gone from its exporter
    lost: list[str] = []

    def gone() -> bool:
        poll = src.poll()
        sampler.ingest(poll)
        lost.extend(x.why for x in poll.lost if x.gpu == "node-a:1")
        return bool(lost)

    _until(gone, "Prometheus kept reporting a GPU its exporter no longer lists")
    sampler.stop()
    src.close()

    by_card = figures([log] if (log := sampler.log.read()) else [])
    data = Record.model_validate(
        {
            "reserve_gib": 3.0,
            "stages": ["context"],
            "cards": [
                {
                    "gpu": c.gpu,
                    "name": c.name,
                    "stages": {s: f.model_dump() for s, f in c.stages.items()},
                    "lost": c.lost,
                }
                for c in by_card.values()
            ],
        }
    )
    verdicts = {j.part: j.verdict for j in reserve(data, ReserveParams(), Thresholds())}
    assert verdicts == {
        "node-a:0": Verdict.PASS,
        "node-a:1": Verdict.ERROR,
        "node-b:0": Verdict.PASS,
        "node-b:1": Verdict.FAIL,
    }
