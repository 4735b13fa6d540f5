"""Roofline arithmetic (report contract, section 5). Pure functions, no device access.

ridge = peak FLOP/s / peak B/s; a stage's roof is min(peak, intensity * bandwidth); its lower-bound time is
max(flops / peak, bytes / bandwidth); roofline efficiency = bound time / measured time (= achieved / roof).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Ceilings:
    """The two roofs for one precision: FLOP rate (TFLOP/s) and DRAM bandwidth (GB/s), and where they came from."""

    tflops: float
    gbps: float
    source: str

    @property
    def ridge(self) -> float:
        """FLOP per byte at which the compute and memory roofs meet."""
        return self.tflops * 1e12 / (self.gbps * 1e9)


def intensity(flops: float, dram_bytes: float) -> float | None:
    return flops / dram_bytes if dram_bytes > 0 else None


def roof_tflops(c: Ceilings, flops: float, dram_bytes: float) -> float:
    i = intensity(flops, dram_bytes)
    return c.tflops if i is None else min(c.tflops, i * c.gbps * 1e9 / 1e12)


def bound_us(c: Ceilings, flops: float, dram_bytes: float) -> float:
    """The roofline-only lower bound on the stage's time, in microseconds."""
    return max(flops / (c.tflops * 1e12), dram_bytes / (c.gbps * 1e9)) * 1e6


def limiting_roof(c: Ceilings, flops: float, dram_bytes: float) -> str:
    """'memory' when the byte term sets the bound, else 'compute'."""
    return "memory" if dram_bytes / (c.gbps * 1e9) >= flops / (c.tflops * 1e12) else "compute"


def achieved_tflops(flops: float, us: float) -> float:
    return flops / (us * 1e-6) / 1e12


def achieved_gbps(dram_bytes: float, us: float) -> float:
    return dram_bytes / (us * 1e-6) / 1e9


def efficiency(c: Ceilings, flops: float, dram_bytes: float, us: float) -> float:
    """Achieved over roof, as a fraction (1.0 = on the roofline; > 1 means the model or the timing is wrong)."""
    return bound_us(c, flops, dram_bytes) / us
