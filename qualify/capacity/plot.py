"""The capacity stage's plot (matplotlib, SVG): aggregate output tok/s against concurrency per lane
and length, the engine's slot limit (past it the server queues streams, so the aggregate
flattens), and goodput against the offered rate with the floor and the knee.
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

from qualify.capacity.loads import Load, OpenCell
from qualify.capacity.record import MatrixRow

if TYPE_CHECKING:
    from matplotlib.axes import Axes

PLOT = "aggregate-vs-concurrency.svg"


def plot(
    rows: list[MatrixRow], title: str, slots: float | None = None, load: Load | None = None
) -> bytes:
    """The SVG of the matrix rows (every lane), the engine's `slots` and the knee search."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    matplotlib.rcParams["svg.hashsalt"] = "qualify-capacity"
    matplotlib.rcParams["svg.fonttype"] = "none"  # text stays text: searchable, and smaller
    cells = [c for c in load.cells if c.rate_rps] if load is not None else []
    fig, axes = plt.subplots(1, 2 if cells else 1, figsize=(12 if cells else 8, 4.8), squeeze=False)
    ax = axes[0][0]
    pts = [r for r in rows if r.aggregate_output_tok_s is not None]
    series = sorted({(r.lane, r.length) for r in pts})
    lengths = sorted({n for _, n in series})
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for lane, length in series:
        mine = [r for r in pts if r.lane == lane and r.length == length]
        line = sorted((r.concurrency, float(r.aggregate_output_tok_s or 0.0)) for r in mine)
        style, colour = "--" if lane != "candidate" else "-", lengths.index(length) % len(colours)
        label = f"{length} tok {lane}: {', '.join(f'c{c} {v:.3g}' for c, v in line)} tok/s"
        xs, ys = [c for c, _ in line], [v for _, v in line]
        ax.plot(xs, ys, marker="o", linestyle=style, color=colours[colour], label=label)
    if isinstance(slots, int | float) and slots > 0:
        ax.axvline(slots, color="grey", linestyle=":", label=f"slot limit: {slots:g} sequences")
    levels = sorted({r.concurrency for r in rows})
    if levels:
        ax.set_xticks(levels)
    ax.set(xlabel="concurrency", ylabel="aggregate output tok/s", ylim=(0, None))
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    if series or slots:
        ax.legend(fontsize=7, loc="best")
    else:
        ax.text(0.5, 0.5, "no cell measured", ha="center", transform=ax.transAxes)
    if cells and load is not None:
        _goodput_panel(axes[0][1], cells, load)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="svg", metadata={"Date": None})
    plt.close(fig)
    return buf.getvalue()


def _goodput_panel(ax: Axes, cells: list[OpenCell], load: Load) -> None:
    raw = [(float(c.rate_rps or 0.0), c.goodput, c.goodput_ci95) for c in cells]
    good = sorted([(x, g, ci) for x, g, ci in raw if g is not None], key=lambda p: p[0])
    xs, ys = [x for x, _, _ in good], [g for _, g, _ in good]
    # a Wilson bound equals the share at 0 % and 100 %, up to rounding: never a negative bar
    lo = [max(0.0, g - ci[0]) for _, g, ci in good if ci]
    hi = [max(0.0, ci[1] - g) for _, g, ci in good if ci]
    label = "goodput: " + ", ".join(f"{x:.3g}/s {y:.0%}" for x, y in zip(xs, ys, strict=True))
    if len(lo) == len(xs):
        ax.errorbar(xs, ys, yerr=[lo, hi], marker="o", capsize=3, label=label)
    else:
        ax.plot(xs, ys, marker="o", label=label)
    if load.slo is not None:
        floor = load.slo.goodput_floor
        ax.axhline(floor, color="red", linestyle=":", label=f"floor {floor:.0%}")
    knee = load.knee
    if knee is not None and knee.rate_rps is not None:
        ax.axvline(
            knee.rate_rps, color="green", linestyle="--", label=f"knee {knee.rate_rps:.3g} req/s"
        )
    ax.set(xscale="log", xlabel="offered rate, req/s (Poisson)", ylim=(0, 1.05))
    ax.set_ylabel("share of requests meeting every SLO")
    ax.set_title(f"goodput under {knee.slo if knee is not None else 'the SLOs'}", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower left")
