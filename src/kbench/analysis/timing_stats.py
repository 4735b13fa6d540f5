"""Statistics of repeated timings: all samples kept, nothing dropped; the spread decides stability."""

from __future__ import annotations

import statistics

from kbench.analysis.bottleneck import BIMODAL_GAP_PCT, BIMODAL_SIDE_PCT, DRIFT_PCT, UNSTABLE_SPREAD_PCT
from kbench.model import Model


def _quantile(sorted_xs: list[float], q: float) -> float:
    """Linear-interpolated quantile of already-sorted values."""
    pos = (len(sorted_xs) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(sorted_xs) - 1)
    return sorted_xs[lo] + (sorted_xs[hi] - sorted_xs[lo]) * (pos - lo)


class TimingStats(Model):
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
    drift_pct: float | None = None  # last third's median over the first third's, in percent of the median
    modes_us: tuple[float, float] | None = None  # the two modes' medians, when the samples fall into two

    def shape(self) -> str | None:
        """What is wrong with the samples' shape, in words (None: one steady mode)."""
        bits = []
        if self.modes_us is not None:
            bits.append(f"samples fall into two modes, {self.modes_us[0]:.2f} and {self.modes_us[1]:.2f} us")
        if self.drift_pct is not None and abs(self.drift_pct) > DRIFT_PCT:
            bits.append(f"samples drifted {self.drift_pct:+.1f}% from the first third to the last (clock or heat)")
        return "; ".join(bits) or None

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
            drift_pct=_drift(samples_us, med),
            modes_us=_modes(xs, med),
        )


def _drift(in_order: list[float], med: float) -> float | None:
    third = len(in_order) // 3
    if third < 5 or med <= 0:
        return None
    first, last = statistics.median(in_order[:third]), statistics.median(in_order[-third:])
    return 100.0 * (last - first) / med


def _modes(xs: list[float], med: float) -> tuple[float, float] | None:
    """The two modes of sorted samples split at their widest gap, when that gap is wide and both sides hold
    enough of them."""
    if len(xs) < 10 or med <= 0:
        return None
    side = max(1, int(len(xs) * BIMODAL_SIDE_PCT / 100.0))
    gaps = [(xs[i + 1] - xs[i], i) for i in range(side - 1, len(xs) - side)]
    width, at = max(gaps)
    if 100.0 * width / med < BIMODAL_GAP_PCT:
        return None
    return statistics.median(xs[: at + 1]), statistics.median(xs[at + 1 :])
