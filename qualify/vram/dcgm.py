"""DCGM exporter URLs: free memory and power of GPUs on other hosts (a recipe over two nodes).

Each URL is one `dcgm-exporter` `/metrics` page, parsed with prometheus_client's parser
(`qualify.serving.dialects.MetricsSnapshot`). Free memory is `DCGM_FI_DEV_FB_FREE` (MiB), power
`DCGM_FI_DEV_POWER_USAGE` (W, DCGM's own sample of the board power). A scrape that fails is a
missed sample; a GPU that a later, successful scrape no longer lists is lost.
"""

from __future__ import annotations

import time
from urllib.parse import urlsplit

import httpx

from qualify.serving.dialects import MetricsSnapshot
from qualify.vram.readings import Card, Lost, Poll, Reading

FREE = "DCGM_FI_DEV_FB_FREE"
USED = "DCGM_FI_DEV_FB_USED"
RESERVED = "DCGM_FI_DEV_FB_RESERVED"
TOTAL = "DCGM_FI_DEV_FB_TOTAL"
POWER = "DCGM_FI_DEV_POWER_USAGE"


class DcgmUnavailable(Exception):
    """No DCGM URL answered with GPU memory figures: the reason, in words."""


def readings(text: str, prefix: str, t: float) -> tuple[list[Reading], list[Card]]:
    """The GPUs of one exporter page; a card's key is `<prefix>:<gpu label>`."""
    snap = MetricsSnapshot.parse(text, t)
    free, used, reserved, total, power = (
        snap.by_label(name, "gpu") for name in (FREE, USED, RESERVED, TOTAL, POWER)
    )
    labels = map(dict, snap.samples.get(FREE, {}))
    names = {d.get("gpu", ""): d.get("modelName", "") for d in labels}
    out, cards = [], []
    for idx in sorted(free, key=lambda g: (len(g), g)):
        gpu = f"{prefix}:{idx}"
        size = total.get(idx)
        if size is None and idx in used:
            size = free[idx] + used[idx] + reserved.get(idx, 0.0)
        out.append(Reading(gpu, t, free[idx], used.get(idx), power.get(idx)))
        cards.append(Card(gpu=gpu, name=names.get(idx, ""), total_mib=size or 0.0))
    return out, cards


def prefixes(urls: list[str]) -> list[str]:
    """A short, unique name per URL: the host, or host:port where two share a host."""
    hosts = [urlsplit(u).hostname or u for u in urls]
    return [
        h if hosts.count(h) == 1 else urlsplit(u).netloc for h, u in zip(hosts, urls, strict=True)
    ]


class DcgmSource:
    """GPUs on other hosts, through their dcgm-exporter pages."""

    name = "dcgm"
    power_field = POWER
    memory_info = "DCGM_FI_DEV_FB_FREE/USED (MiB)"

    def __init__(self, urls: list[str], interval_ms: int, client: httpx.Client | None = None):
        # A scrape must end well inside one interval, or one slow host would stall the rest.
        timeout = max(0.1, min(1.0, interval_ms / 1000 * 0.8))
        self.http = client or httpx.Client(timeout=timeout)
        self.urls = dict(zip(prefixes(urls), urls, strict=True))
        self.seen: dict[str, set[str]] = {}
        self._cards: list[Card] = []
        self.problems: list[str] = []
        for prefix, url in self.urls.items():
            got = self._scrape(url, prefix)
            if isinstance(got, str):
                self.problems.append(f"{url} did not answer at start: {got}")
                continue
            self._cards.extend(got[1])
            self.seen[prefix] = {c.gpu for c in got[1]}
        if not self._cards:
            raise DcgmUnavailable("; ".join(self.problems) or "no DCGM URL lists a GPU")

    def _scrape(self, url: str, prefix: str) -> tuple[list[Reading], list[Card]] | str:
        try:
            resp = self.http.get(url)
        except httpx.HTTPError as exc:
            return f"{type(exc).__name__}: {exc}"
        if resp.status_code != 200:
            return f"HTTP {resp.status_code}"
        try:
            return readings(resp.text, prefix, time.monotonic())
        except ValueError as exc:
            return f"not Prometheus text: {exc}"

    def cards(self) -> list[Card]:
        return list(self._cards)

    def poll(self) -> Poll:
        out = Poll([], [], [])
        for prefix, gpus in self.seen.items():
            if not gpus:
                continue
            got = self._scrape(self.urls[prefix], prefix)
            if isinstance(got, str):
                out.missed.append(f"{self.urls[prefix]}: {got}")
                continue
            listed = {r.gpu for r in got[0]}
            out.readings.extend(r for r in got[0] if r.gpu in gpus)
            for gpu in sorted(gpus - listed):
                why = f"{self.urls[prefix]} no longer lists GPU {gpu.rsplit(':', 1)[1]}"
                out.lost.append(Lost(gpu, time.monotonic(), why))
            gpus &= listed
        return out

    def close(self) -> None:
        self.http.close()


def render(cards: list[dict[str, object]], hostname: str, driver: str) -> str:
    """Exposition text in dcgm-exporter 4.x's layout (HELP, TYPE, its label set), for proofs
    and test exporters. Each card: gpu, uuid, pci_bus_id, name, free, used, reserved (MiB),
    power (W)."""
    metrics = [
        (FREE, "Framebuffer memory free (in MiB).", "free", "{:.0f}"),
        (USED, "Framebuffer memory used (in MiB).", "used", "{:.0f}"),
        (RESERVED, "Framebuffer memory reserved (in MiB).", "reserved", "{:.0f}"),
        (POWER, "Power draw (in W).", "power", "{:.6f}"),
    ]
    lines = []
    for name, help_text, key, fmt in metrics:
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} gauge"]
        for c in cards:
            labels = (
                f'gpu="{c["gpu"]}",UUID="{c["uuid"]}",pci_bus_id="{c["pci_bus_id"]}",'
                f'device="nvidia{c["gpu"]}",modelName="{c["name"]}",Hostname="{hostname}",'
                f'DCGM_FI_DRIVER_VERSION="{driver}"'
            )
            lines.append(f"{name}{{{labels}}} {fmt.format(c[key])}")
    return "\n".join(lines) + "\n"
