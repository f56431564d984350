"""Service-level objectives and goodput: the house's SLOs, which a candidate may only tighten
(`effective`), whether a request meets them (`misses`), and a cell's goodput, the share of its
requests that do, with a Wilson 95% interval (`goodput`): docs/capacity.md, "SLOs and goodput"."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Annotated

from pydantic import Field

from qualify.capacity.parts import Part
from qualify.gates.thresholds import Thresholds
from qualify.httpclient.timing import percentile
from qualify.records import StrictModel

Z95 = 1.959963984540054
METRICS = ("ttft_s", "tpot_s", "e2e_s")


class SloSettings(StrictModel):
    """A candidate's tightening of the house's SLOs (`[stages.capacity.slo]`)."""

    ttft_s: Annotated[float, Field(gt=0)] | None = None
    tpot_s: Annotated[float, Field(gt=0)] | None = None
    e2e_s: Annotated[float, Field(gt=0)] | None = None
    percentile: Annotated[float, Field(ge=50, lt=100)] | None = None
    goodput_floor: Annotated[float, Field(ge=0, le=1)] | None = None


class Slo(Part):
    """The effective SLOs a cell is judged under: the house's, tightened by the candidate's;
    `ignored` says which of the candidate's were looser and so not used."""

    ignored: list[str] = Field(default_factory=list)
    ttft_s: float | None = None
    tpot_s: float | None = None
    e2e_s: float | None = None
    percentile: float = 95.0
    goodput_floor: float = 0.0


class SloFigures(Part):
    """One figure per SLO metric (TTFT, TPOT, E2E)."""

    ttft_s: float | None = None
    tpot_s: float | None = None
    e2e_s: float | None = None


class SloMet(Part):
    ttft_s: bool | None = None
    tpot_s: bool | None = None
    e2e_s: bool | None = None


class Goodput(Part):
    """A cell's goodput: the share and rate of its requests meeting every SLO, with intervals,
    each latency at the SLO percentile, whether it is met, and why requests missed."""

    requests: int = 0
    good: int = 0
    goodput: float | None = None
    goodput_ci95: list[float] | None = None
    goodput_rps: float | None = None
    goodput_rps_ci95: list[float] | None = None
    at_percentile: SloFigures = Field(default_factory=SloFigures)
    slo_met: SloMet = Field(default_factory=SloMet)
    missed_by: dict[str, int] = Field(default_factory=dict)


def effective(t: Thresholds, mine: SloSettings) -> Slo:
    """The SLOs a cell is judged under: the house's, tightened by the candidate's."""
    ignored: list[str] = []
    bounds: dict[str, float | None] = {}
    for name in METRICS:
        house, want = getattr(t, f"slo_{name}"), getattr(mine, name)
        looser = want is not None and house is not None and want > house
        if looser:
            ignored.append(f"slo.{name} {want:g} is looser than the house's {house:g}")
        bounds[name] = house if want is None or looser else want
    least = {"percentile": t.slo_percentile, "goodput_floor": t.goodput_floor}
    for name, house in least.items():
        want = getattr(mine, name)
        if want is not None and want < house:
            ignored.append(f"slo.{name} {want:g} is below the house's {house:g}")
        elif want is not None:
            least[name] = want
    return Slo(ignored=ignored, **bounds, **least)


def bounds(slo: Slo) -> list[str]:
    """`TTFT ≤ 5 s`, … for each metric the SLOs bound."""
    names = {"ttft_s": "TTFT", "tpot_s": "TPOT", "e2e_s": "E2E"}
    return [f"{names[m]} ≤ {b:g} s" for m in METRICS if (b := getattr(slo, m)) is not None]


def shown(slo: Slo) -> str:
    """`TTFT ≤ 5 s, TPOT ≤ 0.2 s, E2E ≤ 60 s (p95)`."""
    return f"{', '.join(bounds(slo)) or 'no latency bound'} (p{slo.percentile:g})"


def tpot(stream: Mapping[str, object]) -> float | None:
    """Seconds per output token after the first: 1 / per-stream decode."""
    d = stream.get("decode_tok_s")
    return 1.0 / d if isinstance(d, int | float) and d > 0 else None


def number(v: object) -> float | None:
    """A figure read from a stream or a cell: the number, else None."""
    return v if isinstance(v, int | float) else None


def misses(stream: Mapping[str, object], slo: Slo) -> list[str]:
    """Why one request does not meet the SLOs (empty when it does)."""
    if stream.get("unfinished"):
        return [f"unfinished: {stream['unfinished']}"]
    if stream.get("failed") or stream.get("cut"):
        return [str(stream.get("failed") or stream.get("cut"))]
    out = []
    if isinstance(broken := stream.get("broken"), list) and broken:
        out.append("broken answer: " + "; ".join(broken))
    values = {
        "ttft_s": number(stream.get("ttft_s")),
        "tpot_s": tpot(stream),
        "e2e_s": number(stream.get("e2e_s")),
    }
    for m in METRICS:
        bound, v = getattr(slo, m), values[m]
        if bound is None:
            continue
        if v is None:
            if m == "tpot_s" and (number(stream.get("completion_tokens")) or 0) <= 1:
                continue  # one token has no time per output token
            out.append(f"no {m}")
        elif v > bound:
            out.append(f"{m} {v:.3g} > {bound:g}")
    return out


def wilson(good: int, n: int, z: float = Z95) -> tuple[float, float] | None:
    """Wilson score interval of a share; None for no trials. The interval always holds the share
    itself: at 0% or 100% the exact bound is the share, which floating point can miss by one ulp
    (48 of 48 gives 0.9999999999999999), so the bounds are clamped to it."""
    if n <= 0:
        return None
    p = good / n
    den = 1 + z * z / n
    mid = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return min(p, max(0.0, mid - half)), max(p, min(1.0, mid + half))


def goodput(streams: Sequence[Mapping[str, object]], slo: Slo, window_s: float | None) -> Goodput:
    """A cell's goodput: share and rate of requests meeting every SLO, with intervals, and each
    latency at the SLO percentile over the answered requests."""
    n = len(streams)
    why = [misses(s, slo) for s in streams]
    good = sum(1 for w in why if not w)
    ci = wilson(good, n)
    answered = [s for s in streams if not (s.get("failed") or s.get("cut") or s.get("unfinished"))]

    def at(values: Sequence[object]) -> float | None:
        return percentile([float(v) for v in values if isinstance(v, int | float)], slo.percentile)

    figures = SloFigures(
        ttft_s=at([s.get("ttft_s") for s in answered]),
        tpot_s=at([tpot(s) for s in answered]),
        e2e_s=at([s.get("e2e_s") for s in answered]),
    )

    def met(m: str) -> bool | None:
        bound, value = getattr(slo, m), getattr(figures, m)
        return None if bound is None or value is None else bool(value <= bound)

    counts = Counter(reason.split(" ", 1)[0].rstrip(":") for w in why for reason in w)
    return Goodput(
        requests=n,
        good=good,
        goodput=good / n if n else None,
        goodput_ci95=list(ci) if ci else None,
        goodput_rps=good / window_s if window_s else None,
        goodput_rps_ci95=[ci[0] * n / window_s, ci[1] * n / window_s] if ci and window_s else None,
        at_percentile=figures,
        slo_met=SloMet(ttft_s=met("ttft_s"), tpot_s=met("tpot_s"), e2e_s=met("e2e_s")),
        missed_by=dict(counts),
    )
