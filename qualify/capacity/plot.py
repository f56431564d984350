"""The capacity stage's plot (matplotlib, SVG): aggregate output tok/s against concurrency, one
line per lane and prompt length (the incumbent dashed), each legend entry with its numbers
(the figure at each concurrency), and the engine's slot limit as a vertical line: beyond it
the server queues streams instead of running them, so the aggregate flattens there.

With an open-loop knee search, a second panel shows goodput against the offered rate, the
house's floor as a horizontal line and the knee marked.
"""

from __future__ import annotations

import io
from typing import Any

PLOT = "aggregate-vs-concurrency.svg"


def _legend(lane: str, length: int, line: list[tuple[int, float]]) -> str:
    vals = ", ".join(f"c{c} {v:.3g}" for c, v in line)
    return f"{length} tok {lane}: {vals} tok/s"


def plot(
    rows: list[dict[str, Any]],
    title: str,
    slots: float | None = None,
    load: dict[str, Any] | None = None,
) -> bytes:
    """The SVG bytes; `rows` are matrix rows (`lane`, `length`, `concurrency`,
    `aggregate_output_tok_s`), `slots` the engine's concurrent sequences, `load` the knee
    search's record (`cells`, `knee`, `slo`)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    matplotlib.rcParams["svg.hashsalt"] = "qualify-capacity"
    matplotlib.rcParams["svg.fonttype"] = "none"  # text stays text: searchable, and smaller
    cells = [c for c in (load or {}).get("cells", []) if c.get("rate_rps")]
    fig, axes = plt.subplots(1, 2 if cells else 1, figsize=(12 if cells else 8, 4.8), squeeze=False)
    ax = axes[0][0]
    pts = [r for r in rows if isinstance(r.get("aggregate_output_tok_s"), int | float)]
    series = sorted({(str(r.get("lane", "candidate")), int(r["length"])) for r in pts})
    lengths = sorted({n for _, n in series})
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for lane, length in series:
        line = sorted(
            (int(r["concurrency"]), float(r["aggregate_output_tok_s"]))
            for r in pts
            if r.get("lane", "candidate") == lane and int(r["length"]) == length
        )
        ax.plot(
            [c for c, _ in line],
            [v for _, v in line],
            marker="o",
            linestyle="--" if lane != "candidate" else "-",
            color=colours[lengths.index(length) % len(colours)],
            label=_legend(lane, length, line),
        )
    if isinstance(slots, int | float) and slots > 0:
        ax.axvline(slots, color="grey", linestyle=":", label=f"slot limit: {slots:g} sequences")
    levels = sorted({int(r["concurrency"]) for r in rows})
    if levels:
        ax.set_xticks(levels)
    ax.set_xlabel("concurrency")
    ax.set_ylabel("aggregate output tok/s")
    ax.set_ylim(bottom=0)
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    if series or slots:
        ax.legend(fontsize=7, loc="best")
    else:
        ax.text(0.5, 0.5, "no cell measured", ha="center", transform=ax.transAxes)
    if cells:
        _goodput_panel(axes[0][1], cells, load or {})
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="svg", metadata={"Date": None})
    plt.close(fig)
    return buf.getvalue()


def _goodput_panel(ax: Any, cells: list[dict[str, Any]], load: dict[str, Any]) -> None:
    pts = sorted((float(c["rate_rps"]), c.get("goodput"), c.get("goodput_ci95")) for c in cells)
    xs = [x for x, g, _ in pts if g is not None]
    ys = [g for _, g, _ in pts if g is not None]
    lo = [g - ci[0] for _, g, ci in pts if g is not None and ci]
    hi = [ci[1] - g for _, g, ci in pts if g is not None and ci]
    label = "goodput: " + ", ".join(f"{x:.3g}/s {y:.0%}" for x, y in zip(xs, ys, strict=True))
    if len(lo) == len(xs):
        ax.errorbar(xs, ys, yerr=[lo, hi], marker="o", capsize=3, label=label)
    else:
        ax.plot(xs, ys, marker="o", label=label)
    floor = (load.get("slo") or {}).get("goodput_floor")
    if isinstance(floor, int | float):
        ax.axhline(floor, color="red", linestyle=":", label=f"floor {floor:.0%}")
    knee = load.get("knee") or {}
    if isinstance(knee.get("rate_rps"), int | float):
        ax.axvline(
            knee["rate_rps"],
            color="green",
            linestyle="--",
            label=f"knee {knee['rate_rps']:.3g} req/s",
        )
    ax.set_xscale("log")
    ax.set_xlabel("offered rate, req/s (Poisson)")
    ax.set_ylabel("share of requests meeting every SLO")
    ax.set_ylim(0, 1.05)
    ax.set_title(f"goodput under {(load.get('knee') or {}).get('slo', 'the SLOs')}", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower left")
