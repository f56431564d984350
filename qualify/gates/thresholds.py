"""The numbers gates judge against that belong to production, not to the candidate.

The house policy (which lives with the alias table) sets them; a candidate may only tighten them.
Every judge receives the effective `Thresholds`; gate files hold only the knobs that are not
policy (which depths to probe, how many streams).
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Annotated

from pydantic import Field

from qualify.records import StrictModel

Fraction = Annotated[float, Field(ge=0, le=1)]


class Thresholds(StrictModel):
    """Every threshold a gate may judge against, with the defaults of a cautious house."""

    vram_reserve_gib: Annotated[float, Field(ge=0)] = Field(
        3.0, description="free memory every card keeps in every stage (GiB)"
    )
    vram_max_gap_fraction: Fraction = Field(
        0.05, description="share of missed sampler intervals beyond which vram is inconclusive"
    )
    acceptance_floor: Fraction = Field(
        0.3, description="lowest draft acceptance rate a speculative lane may show"
    )
    ab_max_regression_pct: Annotated[float, Field(ge=0)] = Field(
        3.0,
        description="a candidate slower than its control by more than this, with the whole "
        "bootstrap interval beyond it, fails (decode and E2E)",
    )
    spec_min_speedup_pct: float = Field(
        0.0,
        description="when the variable is speculative decoding, the decode speed-up the "
        "candidate must show over its control (median delta, per cent)",
    )
    lossless_min_share: Fraction = Field(
        1.0,
        description="share of the control's tokens, over the A/B's paired answers at "
        "temperature 0, that come before each pair's first divergence (1.0: every answer "
        "identical)",
    )
    fidelity_decode_tolerance: Fraction = Field(
        0.03, description="client decode rate within this share of the server's own"
    )
    fidelity_ttft_ms: dict[str, Annotated[float, Field(gt=0)]] = Field(
        default_factory=lambda: {"*": 15.0},
        description="bound on TTFT minus the server's prompt time (ms), by `engine@c=N` "
        "pattern (fnmatch; the most specific match wins, `*` is the fallback)",
    )
    capacity_max_ttft_p95_s: Annotated[float, Field(gt=0)] | None = Field(
        30.0,
        description="capacity saturation: concurrency stops rising at a prompt length once a "
        "cell's p95 TTFT passes this (s); a candidate may set a tighter bound",
    )
    slo_percentile: Annotated[float, Field(ge=50, lt=100)] = Field(
        95.0,
        description="capacity SLOs hold at this percentile of a load cell's requests (higher "
        "is stricter)",
    )
    slo_ttft_s: Annotated[float, Field(gt=0)] | None = Field(
        5.0, description="SLO: request sent to first visible token (s); lower is stricter"
    )
    slo_tpot_s: Annotated[float, Field(gt=0)] | None = Field(
        0.2,
        description="SLO: time per output token after the first, (last − first token) / "
        "(completion tokens − 1) (s); lower is stricter",
    )
    slo_e2e_s: Annotated[float, Field(gt=0)] | None = Field(
        60.0, description="SLO: request sent to response end (s); lower is stricter"
    )
    goodput_floor: Fraction = Field(
        0.9,
        description="share of a load cell's requests that must meet every SLO; the knee is the "
        "highest rate whose goodput stays at or above it",
    )
    capacity_min_goodput_rps: Annotated[float, Field(gt=0)] | None = Field(
        None,
        description="the rate (req/s) the recipe must serve at the goodput floor under the "
        "SLOs (none: no minimum); higher is stricter",
    )
    client_max_lag_ms: Annotated[float, Field(gt=0)] = Field(
        200.0,
        description="open-loop harness bound: p99 of (actual − intended send time) and of the "
        "event loop's oversleep; beyond it the cell is a harness error, not a server figure",
    )
    client_max_clock_uncertainty_ms: Annotated[float, Field(gt=0)] = Field(
        20.0,
        description="open-loop load on Ray workers: half the round trip of each worker's best "
        "clock probe before a cell; beyond it the cell is a harness error (its workers' send "
        "times cannot be placed on one clock within it); lower is stricter",
    )
    soak_min_requests: Annotated[int, Field(ge=1)] = Field(
        30,
        description="completed requests below which a soak shows nothing (inconclusive, never "
        "a pass)",
    )
    soak_min_third_requests: Annotated[int, Field(ge=2)] = Field(
        10,
        description="soak: answered requests in each third (the first and the last, by send "
        "time) below which the TTFT drift is not judged (inconclusive, never a pass); higher "
        "is stricter",
    )
    soak_duration_s: Annotated[float, Field(gt=0)] = Field(
        30.0,
        description="steady load of the capacity soak (s); longer is stricter (a production "
        "house sets minutes)",
    )
    soak_stall_s: Annotated[float, Field(gt=0)] = Field(
        20.0,
        description="a soak with requests in flight and no progress (no generated-token "
        "counter step, no request completed) for this long is a hung engine (s)",
    )
    soak_max_ttft_drift_pct: Annotated[float, Field(ge=0)] = Field(
        100.0,
        description="soak: median TTFT of the last third of requests over the first third, "
        "in per cent above 100 (lower is stricter)",
    )
    soak_min_ttft_drift_s: Annotated[float, Field(ge=0)] = Field(
        0.0,
        description="soak: a TTFT drift beyond the per-cent bound fails only when the median "
        "also rose by at least this many seconds (0: any rise); a relative drift on sub-second "
        "TTFTs is otherwise a fraction of a second; lower is stricter",
    )
    soak_max_memory_growth_mib: Annotated[float, Field(ge=0)] = Field(
        1024.0,
        description="soak: growth of the server's memory (GPU used memory, else the server "
        "process's RSS) from start to end (MiB); lower is stricter",
    )
    # The last three were added after decisions were signed under policies without them: left
    # out of the dump at their default, so a policy that does not set them keeps its digest.
    soak_max_acceptance_drop_pct: Annotated[float, Field(ge=0)] = Field(
        20.0,
        exclude_if=lambda v: v == 20.0,
        description="soak, speculative decoding: the fall of the draft acceptance rate and of "
        "the mean accepted length from the first third of the soak's time to the last (per "
        "cent of the first); lower is stricter",
    )
    soak_min_third_drafts: Annotated[int, Field(ge=1)] = Field(
        50,
        exclude_if=lambda v: v == 50,
        description="soak, speculative decoding: drafts in the first and the last third below "
        "which the acceptance drift is not judged (inconclusive, never a pass)",
    )
    context_min_acceptance_ratio: Fraction = Field(
        0.5,
        exclude_if=lambda v: v == 0.5,
        description="context ladder, speculative decoding: the lowest draft acceptance rate a "
        "rung may show, as a share of the shallowest rung's; higher is stricter",
    )
    unverifiable_pins: list[str] = Field(
        default_factory=list,
        description="identity pins that may stay unverified (no server reports them) without "
        "making identity inconclusive",
    )

    def ttft_bound_ms(self, engine: str, concurrency: int) -> float:
        """The TTFT-gap bound for one engine at one concurrency: the longest matching pattern."""
        key = f"{engine}@c={concurrency}"
        hits = [p for p in self.fidelity_ttft_ms if fnmatchcase(key, p) or p == engine]
        if not hits:
            return 15.0
        return self.fidelity_ttft_ms[max(hits, key=lambda p: (p != "*", len(p)))]
