"""Timing statistics: every sample kept, the interquartile spread decides stability."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kbench.analysis.timing_stats import TimingStats

ROOT = Path(__file__).parents[1]


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


def test_drift_and_two_modes_are_named() -> None:
    steady = TimingStats.of([100.0 + 0.1 * (i % 3) for i in range(60)])
    assert steady.shape() is None
    drifting = TimingStats.of([100.0 + 0.2 * i for i in range(60)])  # 100 -> 112 us over the run
    assert drifting.drift_pct is not None and drifting.drift_pct > 3 and "drifted +" in (drifting.shape() or "")
    two = TimingStats.of([100.0] * 30 + [120.0] * 30)
    assert two.modes_us == (100.0, 120.0) and "two modes, 100.00 and 120.00 us" in (two.shape() or "")
    few = TimingStats.of([100.0, 120.0, 100.0])
    assert few.shape() is None  # too few samples to tell


def test_real_h100_samples_with_a_sagging_clock() -> None:
    # matmul v2 in event mode on an H100 whose SM clock fell from 1965 to 1590 MHz during the run
    run = ROOT / "tests" / "data" / "examples_h100_1122" / "event-matmul-v2"
    samples = json.loads((run / "timings.json").read_text())
    t = TimingStats.of(samples["stages"]["mm"]["samples_us"])
    assert t.modes_us is not None and t.modes_us[1] - t.modes_us[0] > 25
    assert t.drift_pct is not None and abs(t.drift_pct) > 3
