"""Statistics of repeated timings: all samples kept, nothing dropped; the spread decides stability."""

from __future__ import annotations

import statistics

from pydantic import BaseModel

from kbench.analysis.bottleneck import UNSTABLE_SPREAD_PCT


def _quantile(sorted_xs: list[float], q: float) -> float:
    """Linear-interpolated quantile of already-sorted values."""
    pos = (len(sorted_xs) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(sorted_xs) - 1)
    return sorted_xs[lo] + (sorted_xs[hi] - sorted_xs[lo]) * (pos - lo)


class TimingStats(BaseModel):
    """Summary of n samples in microseconds. spread_pct = interquartile range / median, in percent."""

    n: int
    median_us: float
    mean_us: float
    stdev_us: float
    min_us: float
    max_us: float
    p10_us: float
    p25_us: float
    p75_us: float
    p90_us: float
    spread_pct: float
    unstable: bool

    @classmethod
    def of(cls, samples_us: list[float]) -> TimingStats:
        if not samples_us:
            raise ValueError("no timing samples")
        xs = sorted(samples_us)
        med = statistics.median(xs)
        p25, p75 = _quantile(xs, 0.25), _quantile(xs, 0.75)
        spread = 100.0 * (p75 - p25) / med if med > 0 else 0.0
        return cls(
            n=len(xs),
            median_us=med,
            mean_us=statistics.fmean(xs),
            stdev_us=statistics.stdev(xs) if len(xs) > 1 else 0.0,
            min_us=xs[0],
            max_us=xs[-1],
            p10_us=_quantile(xs, 0.10),
            p25_us=p25,
            p75_us=p75,
            p90_us=_quantile(xs, 0.90),
            spread_pct=spread,
            unstable=spread > UNSTABLE_SPREAD_PCT,
        )
