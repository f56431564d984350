"""Aggregate output tok/s against concurrency, one line per prompt length, as a plain SVG.

Written by hand (no plotting library in the environment): axes with ticks, one polyline and
marker per length, the incumbent dashed when there is one, and a legend.
"""

from __future__ import annotations

from html import escape
from typing import Any

W, H = 640, 400
LEFT, RIGHT, TOP, BOTTOM = 70, 160, 40, 50
COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf")


def _nice_max(v: float) -> float:
    if v <= 0:
        return 1.0
    step = 10.0 ** len(str(int(v))) / 10
    for m in (1, 2, 2.5, 5, 10):
        if v <= m * step:
            return float(m * step)
    return float(10 * step)


def svg(rows: list[dict[str, Any]], title: str) -> str:
    """`rows` are matrix rows (`lane`, `length`, `concurrency`, `aggregate_output_tok_s`)."""
    pts = [r for r in rows if isinstance(r.get("aggregate_output_tok_s"), int | float)]
    levels = sorted({int(r["concurrency"]) for r in rows}) or [1]
    ymax = _nice_max(max((float(r["aggregate_output_tok_s"]) for r in pts), default=1.0))
    pw, ph = W - LEFT - RIGHT, H - TOP - BOTTOM

    def x(c: int) -> float:
        i = levels.index(c)
        return LEFT + (pw * i / (len(levels) - 1) if len(levels) > 1 else pw / 2)

    def y(v: float) -> float:
        return TOP + ph - ph * v / ymax

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
        f'font-family="sans-serif" font-size="12">',
        f'<rect width="{W}" height="{H}" fill="white"/>',
        f'<text x="{W / 2}" y="20" text-anchor="middle" font-size="14">{escape(title)}</text>',
        f'<line x1="{LEFT}" y1="{TOP + ph}" x2="{LEFT + pw}" y2="{TOP + ph}" stroke="black"/>',
        f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{TOP + ph}" stroke="black"/>',
        f'<text x="{LEFT + pw / 2}" y="{H - 12}" text-anchor="middle">concurrency</text>',
        f'<text x="16" y="{TOP + ph / 2}" text-anchor="middle" '
        f'transform="rotate(-90 16 {TOP + ph / 2})">aggregate output tok/s</text>',
    ]
    for c in levels:
        out.append(f'<text x="{x(c):.1f}" y="{TOP + ph + 18}" text-anchor="middle">{c}</text>')
    for i in range(5):
        v = ymax * i / 4
        out.append(
            f'<line x1="{LEFT - 4}" y1="{y(v):.1f}" x2="{LEFT + pw}" y2="{y(v):.1f}" '
            f'stroke="#ddd"/><text x="{LEFT - 8}" y="{y(v) + 4:.1f}" text-anchor="end">{v:g}</text>'
        )
    series = sorted({(str(r.get("lane", "candidate")), int(r["length"])) for r in pts})
    lengths = sorted({n for _, n in series})
    for k, (lane, length) in enumerate(series):
        colour = COLOURS[lengths.index(length) % len(COLOURS)]
        dash = ' stroke-dasharray="6 4"' if lane != "candidate" else ""
        line = sorted(
            (int(r["concurrency"]), float(r["aggregate_output_tok_s"]))
            for r in pts
            if r.get("lane", "candidate") == lane and int(r["length"]) == length
        )
        path = " ".join(f"{x(c):.1f},{y(v):.1f}" for c, v in line)
        out.append(
            f'<polyline points="{path}" fill="none" stroke="{colour}"{dash} stroke-width="2"/>'
        )
        out += [f'<circle cx="{x(c):.1f}" cy="{y(v):.1f}" r="3" fill="{colour}"/>' for c, v in line]
        ly = TOP + 16 * k
        out.append(
            f'<line x1="{W - RIGHT + 12}" y1="{ly}" x2="{W - RIGHT + 36}" y2="{ly}" '
            f'stroke="{colour}"{dash} stroke-width="2"/>'
            f'<text x="{W - RIGHT + 42}" y="{ly + 4}">{length} tok ({escape(lane)})</text>'
        )
    out.append("</svg>")
    return "\n".join(out) + "\n"
