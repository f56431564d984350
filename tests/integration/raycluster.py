"""A real local Ray cluster for the tests of open-loop load on Ray workers: a head node and one
worker node, each its own `ray start` (two raylets on this host, one CPU each), stopped after.

`ray stop --force` ends every Ray process of this host: these tests are the only Ray users of
the suite (`make test` runs them one at a time with the integration tests).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from qualify.serving.process import free_port

BIN = Path(sys.executable).parent
STORE = str(100 * 1024 * 1024)  # object store per node: the exchanges are small


def ray_cli(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    ray = shutil.which("ray", path=str(BIN)) or "ray"
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    return subprocess.run(
        [ray, *args], capture_output=True, text=True, timeout=120, check=check, env=env
    )


@contextmanager
def local_cluster(tmp: Path, nodes: int = 2) -> Iterator[str]:
    """`nodes` Ray nodes on this host (the head, then workers); their GCS address."""
    port = free_port()
    address = f"127.0.0.1:{port}"
    common = ["--num-cpus", "1", "--object-store-memory", STORE, "--node-ip-address", "127.0.0.1"]
    try:
        ray_cli(
            "start",
            "--head",
            "--port",
            str(port),
            "--include-dashboard",
            "false",
            "--disable-usage-stats",
            "--temp-dir",
            str(tmp),
            *common,
        )
        for _ in range(nodes - 1):
            ray_cli("start", "--address", address, *common)
        _wait_nodes(address, nodes)
        yield address
    finally:
        ray_cli("stop", "--force", check=False)


def _wait_nodes(address: str, nodes: int) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        out = ray_cli("status", "--address", address, check=False).stdout
        if out.count(" node_") >= nodes:
            return
        time.sleep(1)
