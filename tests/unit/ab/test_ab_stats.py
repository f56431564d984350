"""Medians, spreads, the noise label and the seeded bootstrap interval."""

from __future__ import annotations

from qualify.ab.stats import bootstrap_delta_ci, delta_pct, paired_summary, spread, within_noise


def test_spread_is_min_and_max() -> None:
    """The run-to-run spread is the range of the run-level figures."""
    assert spread([3.0, 1.0, 2.0]) == (1.0, 3.0)
    assert spread([]) is None


def test_noise_is_read_from_the_interval() -> None:
    """Within noise only when the interval includes zero; no interval is unknown (None)."""
    assert within_noise((-3.0, 2.0)) is True
    assert within_noise((0.0, 4.0)) is True
    # roomy's decode delta: [-98.8, -11.2] tok/s excludes zero, so it is not noise
    assert within_noise((-98.8, -11.2)) is False
    assert within_noise(None) is None


def test_delta_pct_needs_a_base() -> None:
    """The percentage is relative to the control; no base, no percentage."""
    assert delta_pct(5.0, 50.0) == 10.0
    assert delta_pct(5.0, 0.0) is None
    assert delta_pct(None, 1.0) is None


def test_bootstrap_is_reproducible_and_brackets_the_delta() -> None:
    """The same inputs and seed give the same interval, and it contains the observed delta."""
    a, b = [130.0, 128.5, 133.1], [64.9, 66.0, 63.2]
    ci = bootstrap_delta_ci(a, b, 2000, seed=7)
    assert ci == bootstrap_delta_ci(a, b, 2000, seed=7)
    assert ci is not None and ci[0] <= 130.0 - 64.9 <= ci[1]
    assert ci[0] > 0, "lanes this far apart give an interval clear of zero"
    overlap = bootstrap_delta_ci([10.0, 12.0, 9.0], [11.0, 9.5, 12.5], 2000, seed=7)
    assert overlap is not None and overlap[0] < 0 < overlap[1]
    assert bootstrap_delta_ci([], b) is None
    assert bootstrap_delta_ci([130.0], b) is None, "one run has no spread: no interval"


def test_paired_bootstrap_resamples_prompts_and_is_seeded() -> None:
    """Pairs of one prompt come and go together; the same pairs and seed give the same
    interval; one prompt gives none; a tight set of differences is not "too few"."""
    pairs = [(p, d + i) for i, p in enumerate("abcdef") for d in (-12.0, -11.0, -10.0)]
    one = paired_summary(pairs, 2000, seed=3)
    assert one == paired_summary(pairs, 2000, seed=3)
    assert (one["pairs"], one["prompts"]) == (18, 6)
    lo, hi = one["ci95_pct"]
    assert lo <= one["median_pct"] <= hi and one["too_few"] is False
    single = paired_summary([("a", -5.0), ("a", -6.0)])
    assert single["ci95_pct"] is None and single["too_few"] is True
    wide = paired_summary([("a", -90.0), ("b", 400.0)])
    assert wide["too_few"] is True and "wider than the control" in wide["why"]
