"""Timing statistics: every sample kept, the interquartile spread decides stability."""

from __future__ import annotations

import pytest

from kbench.analysis.timing_stats import TimingStats


def test_quantiles_and_spread() -> None:
    xs = [float(x) for x in range(100, 201)]  # 100..200
    s = TimingStats.of(list(reversed(xs)))
    assert (s.n, s.median_us, s.min_us, s.max_us) == (101, 150.0, 100.0, 200.0)
    assert (s.p25_us, s.p75_us, s.p10_us, s.p90_us) == (125.0, 175.0, 110.0, 190.0)
    assert s.spread_pct == pytest.approx(100 * 50 / 150)
    assert s.unstable


def test_a_tight_distribution_is_stable_and_outliers_are_not_dropped() -> None:
    xs = [100.0] * 50 + [100.5] * 49 + [400.0]
    s = TimingStats.of(xs)
    assert s.n == 100 and s.max_us == 400.0 and s.spread_pct < 2.0 and not s.unstable
    assert s.mean_us > s.median_us  # the outlier still counts


def test_empty_is_an_error() -> None:
    with pytest.raises(ValueError):
        TimingStats.of([])
