"""The decision's plots, from recorded evidence alone: planned as points, then drawn as PNG.

`plan(run, data)` returns one `Plot` per picture with the points it will show, read from the
stages' `data` (and, for the VRAM series, the sampler's files); a plot with no points is not
drawn and the document says so. `draw(plot)` renders exactly those points with matplotlib's
headless Agg backend. `conclude` writes the PNGs into the decision attempt, beside
`decision.md`, so they are sealed and signed with it; the document links them relatively.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qualify.evidence.store import RunDir
from qualify.httpclient.timing import median
from qualify.vram.series import read_logs

Point = tuple[float, float]
Series = list[list[Any]]


@dataclass
class Panel:
    """One set of axes: named series of (x, y) points, optional horizontal lines and bands."""

    ylabel: str
    series: dict[str, list[Point]] = field(default_factory=dict)
    hlines: dict[str, float] = field(default_factory=dict)
    bands: list[tuple[float, float, str]] = field(default_factory=list)
    scatter: bool = False
    markers: dict[str, str] = field(default_factory=dict)
    colors: dict[str, str] = field(default_factory=dict)
    medians: dict[str, Point] = field(default_factory=dict)
    note: str | None = None
    zoom: bool = False


@dataclass
class Plot:
    name: str
    title: str
    xlabel: str
    panels: list[Panel]
    missing: str = "no data was recorded"
    xticks: list[tuple[float, str]] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not any(pts for p in self.panels for pts in p.series.values())


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def _d(x: Any) -> dict[str, Any]:
    return x if isinstance(x, dict) else {}


def _l(x: Any) -> list[Any]:
    return x if isinstance(x, list) else []


def ladder(context: dict[str, Any]) -> Plot:
    """TTFT and decode against actual prompt tokens, cold and warm apart; the needles found
    (o) and missed (x) at their depth, per pass."""
    ttft, decode = Panel("TTFT (s)"), Panel("decode (tok/s)")
    needles = Panel("needle depth (%)", scatter=True)
    for r in (_d(x) for x in _l(context.get("rows"))):
        x = _num(r.get("actual_prompt_tokens"))
        if x is None:
            continue
        for panel, key in ((ttft, "ttft_s"), (decode, "decode_tok_s")):
            y = _num(r.get(key))
            if y is not None:
                panel.series.setdefault(str(r.get("pass")), []).append((x, y))
        for depth, ok in sorted(_d(r.get("needles")).items()):
            d = _num(float(depth)) if str(depth).replace(".", "", 1).isdigit() else None
            if d is None:
                continue
            label = f"{r.get('pass')} {'found' if ok else 'missed'}"
            needles.series.setdefault(label, []).append((x, d))
            needles.markers[label] = "o" if r.get("pass") == "cold" else "^"
            needles.colors[label] = "tab:green" if ok else "tab:red"
    for p in (ttft, decode, needles):
        p.series = {k: sorted(v) for k, v in sorted(p.series.items())}
    panels = [ttft, decode] + ([needles] if needles.series else [])
    return Plot("context-ladder.png", "Context ladder", "prompt tokens", panels)


def ab_distributions(ab: dict[str, Any]) -> Plot:
    """Per-request decode and E2E per lane (x: lane index); the bar beside each lane is the
    run-to-run spread of the lane's figure (min and max of the run-level p50s)."""
    lanes = _d(ab.get("lanes"))
    panels = [Panel("decode (tok/s)", scatter=True), Panel("E2E (s)", scatter=True)]
    ticks = []
    for i, lane in enumerate(k for k in ("candidate", "control") if k in lanes):
        info = _d(lanes[lane])
        name = str(info.get("name") or lane)
        ticks.append((float(i), name))
        for panel, key in zip(panels, ("decode_tok_s", "e2e_s"), strict=True):
            ys = [
                y
                for run in (_d(r) for r in _l(info.get("runs")))
                for q in (_d(x) for x in _l(run.get("requests")))
                if not q.get("failed") and not q.get("excluded") and not q.get("degenerate")
                if (y := _num(q.get(key))) is not None
            ]
            if ys:
                panel.series[name] = [(float(i) + _jitter(k), y) for k, y in enumerate(ys)]
                mid = median(ys)
                assert mid is not None
                panel.medians[name] = (float(i), mid)
            spread = _l(_d(info.get("spread")).get(key))
            if len(spread) == 2 and all(_num(s) is not None for s in spread):
                panel.bands.append((float(spread[0]), float(spread[1]), name))
    plot = Plot("ab-distributions.png", "A/B per request", "lane", panels, xticks=ticks)
    plot.missing = "no per-request timings were recorded"
    return plot


def _jitter(k: int) -> float:
    """A fixed spread across the lane's column, so points that coincide stay visible."""
    return ((k * 0.618034) % 1.0 - 0.5) * 0.36


def acceptance(ab: dict[str, Any]) -> Plot:
    """Acceptance rate by draft position, from the server's counters."""
    per = [_num(p) for p in _l(_d(ab.get("acceptance")).get("per_position"))]
    panel = Panel("accepted fraction")
    pts = [(float(i + 1), p) for i, p in enumerate(per) if p is not None]
    if pts:
        panel.series["acceptance"] = pts
    acc = _d(ab.get("acceptance"))
    drafts, drafted, accepted = acc.get("drafts"), acc.get("draft_tokens"), acc.get("accepted")
    if isinstance(drafts, int):
        panel.note = (
            f"{drafts:,} drafts, {drafted or 0:,} drafted tokens, {accepted or 0:,} accepted"
            + (f"; position 1 reached by all {drafts:,}" if drafts else "")
        )
    plot = Plot("acceptance-by-position.png", "Draft acceptance", "draft position", [panel])
    plot.missing = "no per-position acceptance counters were recorded"
    return plot


def capacity(cap: dict[str, Any]) -> Plot:
    """Aggregate output tok/s against concurrency, one line per lane and prompt length."""
    panel = Panel("aggregate output (tok/s)")
    for r in (_d(x) for x in _l(cap.get("matrix"))):
        c, y = _num(r.get("concurrency")), _num(r.get("aggregate_output_tok_s"))
        if c is None or y is None:
            continue
        label = f"{r.get('lane', 'candidate')} {r.get('length')} tok"
        panel.series.setdefault(label, []).append((c, y))
    panel.series = {k: sorted(v) for k, v in sorted(panel.series.items())}
    return Plot("capacity-aggregate.png", "Capacity", "concurrency", [panel])


def _legacy_series(run: RunDir, vram: dict[str, Any], here: Path | None) -> dict[str, Series]:
    """Per card from an older layout: `series-gpu-N.jsonl` in the vram attempt, a header line
    then rows `[t_s, stage, free_mib, used_mib, power_w, n]`."""
    out: dict[str, Series] = {}
    for name in (str(f) for f in _l(vram.get("series_files"))):
        path = run.path / name if "/" in name or here is None else here / name
        try:
            lines = path.read_text().splitlines()
        except OSError:
            continue
        head = json.loads(lines[0]) if lines else {}
        cols = _l(_d(head).get("columns"))
        if cols[:3] != ["t_s", "stage", "free_mib"]:
            continue
        rows = [json.loads(x) for x in lines[1:] if x.strip()]
        card = f"GPU {head.get('gpu')}"
        out[card] = [[r[0], r[1], r[2], r[4] if len(r) > 4 else None] for r in rows]
    return out


def _samples(run: RunDir, vram: dict[str, Any], here: Path | None) -> dict[str, Series]:
    """`[t_s, stage, free_mib, power_w]` per card, over every telemetry attempt in turn."""
    out: dict[str, Series] = {}
    offset = 0.0
    for log in read_logs(run):
        end = offset
        for line in log.lines:
            if isinstance(line, list) and len(line) >= 6:
                t = float(line[0]) + offset
                out.setdefault(f"GPU {line[2]}", []).append([t, line[1], line[3], line[5]])
                end = max(end, t)
        offset = end
    return out or _legacy_series(run, vram, here)


def vram_series(run: RunDir, vram: dict[str, Any], here: Path | None = None) -> Plot:
    """Free memory and power against time per card, stage bands, the reserve line."""
    reserve = _num(vram.get("reserve_gib"))
    base = reserve * 1024 if reserve is not None else 0.0
    label = "headroom over the reserve (MiB)" if reserve is not None else "free (MiB)"
    free, power = Panel(label, zoom=True), Panel("power (W)")
    if reserve is not None:
        free.hlines["reserve"] = 0.0
    lowest: tuple[float, str] | None = None
    for card, rows in _samples(run, vram, here).items():
        free.series[card] = [
            (float(r[0]), float(r[2]) - base) for r in rows if _num(r[2]) is not None
        ]
        for r in rows:
            if _num(r[2]) is not None and (lowest is None or float(r[2]) - base < lowest[0]):
                lowest = (float(r[2]) - base, f"{card}, {r[1]}")
        pw = [(float(r[0]), float(r[3])) for r in rows if _num(r[3]) is not None]
        if pw:
            power.series[card] = pw
        if not free.bands:
            free.bands = _stage_bands(rows)
    if lowest is not None and reserve is not None:
        word = "above" if lowest[0] >= 0 else "BELOW"
        free.note = (
            f"lowest: {abs(lowest[0]):,.0f} MiB {word} the {base:,.0f} MiB reserve ({lowest[1]})"
        )
    plot = Plot("vram-series.png", "GPU memory and power", "seconds", [free, power])
    plot.missing = "no GPU telemetry was recorded"
    return plot


def _stage_bands(rows: list[list[Any]]) -> list[tuple[float, float, str]]:
    bands: list[tuple[float, float, str]] = []
    for r in rows:
        t, stage = float(r[0]), str(r[1])
        if bands and bands[-1][2] == stage:
            bands[-1] = (bands[-1][0], t, stage)
        else:
            bands.append((t, t, stage))
    return bands


def plan(run: RunDir, data: dict[str, dict[str, Any]], vram_dir: Path | None = None) -> list[Plot]:
    """Every plot of the decision, with its points; `data` maps stage to its `data`,
    `vram_dir` is the vram stage's authoritative attempt (older runs keep series there)."""
    ab = data.get("ab") or {}
    return [
        ladder(data.get("context") or {}),
        ab_distributions(ab),
        vram_series(run, data.get("vram") or {}, vram_dir),
        acceptance(ab),
        capacity(data.get("capacity") or {}),
    ]


def draw(plot: Plot) -> bytes:
    """The PNG of a plot, drawn headless; the same points give the same bytes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(plot.panels), 1, figsize=(7, 2.6 * len(plot.panels)), dpi=90)
    axes = list(axes) if len(plot.panels) > 1 else [axes]
    for ax, panel in zip(axes, plot.panels, strict=True):
        for label, pts in panel.series.items():
            xs, ys = [p[0] for p in pts], [p[1] for p in pts]
            if panel.scatter:
                mark = panel.markers.get(label, "o")
                color = panel.colors.get(label)
                ax.scatter(xs, ys, s=14, alpha=0.6, label=label, marker=mark, color=color)
            else:
                ax.plot(xs, ys, marker="o", markersize=3, label=label)
        for x, y in panel.medians.values():
            ax.hlines(y, x - 0.25, x + 0.25, color="black", linewidth=2)
            ax.annotate(f"median {y:,.4g}", (x + 0.26, y), fontsize=7, va="center")
        for lo, hi, label in panel.bands:
            if panel.scatter:
                x = panel.medians[label][0] if label in panel.medians else 0.0
                ax.vlines(x + 0.15, lo, hi, linewidth=5, color="black", alpha=0.5)
            else:
                ax.axvspan(lo, hi, alpha=0.06 if len(ax.patches) % 2 else 0.12, color="grey")
                where = ax.get_xaxis_transform()
                ax.text(lo, 0.98, label, transform=where, va="top", rotation=90, fontsize=7)
        if panel.zoom:
            ys = [p[1] for pts in panel.series.values() for p in pts]
            if ys:
                lo, hi = min(ys), max(ys)
                pad = max((hi - lo) * 0.1, 1.0)
                ax.set_ylim(lo - pad, hi + pad)
        for label, y in panel.hlines.items():
            lo, hi = ax.get_ylim()
            if not panel.zoom or lo <= y <= hi:
                ax.axhline(y, color="red", linestyle="--", linewidth=1, label=label)
        if panel.note:
            ax.text(0.01, 0.03, panel.note, transform=ax.transAxes, fontsize=7, va="bottom")
        ax.set_ylabel(panel.ylabel)
        if panel.series or panel.hlines:
            ax.legend(fontsize=7, loc="best")
        ax.grid(alpha=0.3)
    if plot.xticks:
        for ax in axes:
            ax.set_xticks([t for t, _ in plot.xticks], [n for _, n in plot.xticks])
            ax.set_xlim(-0.5, len(plot.xticks) - 0.5)
    axes[0].set_title(plot.title)
    axes[-1].set_xlabel(plot.xlabel)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    plt.close(fig)
    return buf.getvalue()


def drawn(plots: list[Plot]) -> list[tuple[str, bytes]]:
    """Name and PNG of every plot that has points."""
    return [(p.name, draw(p)) for p in plots if not p.empty]
