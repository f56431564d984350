"""The decision's plots, from recorded evidence alone: planned as points, then drawn as PNG.

`plan(run, records, dirs)` returns one `Plot` per picture with the points it will show,
read from the stages' records (and, for the VRAM series, the sampler's files); a plot with no
points is not drawn and the document says so. `draw(plot)` renders exactly those points with
matplotlib's headless Agg backend. `conclude` writes the PNGs into the decision attempt, beside
`decision.md`, so they are sealed and signed with it; the document links them relatively.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from qualify.evidence.store import RunDir
from qualify.present.reading import RunView, StageView
from qualify.records import StageRecord
from qualify.registry import specs

Point = tuple[float, float]
Series = list[list[Any]]  # rows of raw sample JSON, as the run's files hold them


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


def num(v: object) -> float | None:
    """A number as a float; None for anything else (a bool is no number)."""
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def plan(
    run: RunDir, records: Mapping[str, StageRecord], stages: Mapping[str, StageView] | None = None
) -> list[Plot]:
    """Every plot of the decision, with its points: each registered stage's `plots` (its spec's
    parts) plans its own from the stage's typed record (None when the stage has none) and its
    authoritative attempt in `stages` (older runs kept the VRAM series there)."""
    out: list[Plot] = []
    for name, spec in specs().items():
        if spec.loaded.plots is not None:
            got = (stages or {}).get(name)
            out += spec.loaded.plots(run, records.get(name), got.dir if got else None)
    return out


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


def drawn(view: RunView) -> list[tuple[str, bytes]]:
    """Name and PNG of every plot of the run as a decision counted it (`view`) that has points."""
    return [(p.name, draw(p)) for p in plan(view.run, view.records(), view.stages) if not p.empty]
