"""What does an unlocked GPU's SM clock do while kbench times a GEMM, and can spacing keep it steady?
`python -m tests.benchmark.steady_clock [seconds of heating]` on a CUDA machine (clocks left alone).

A 4096^3 bf16 GEMM (matmul base) timed by CUPTI with the GPU-side clock probe around each repetition (two one-thread
spins of known SM cycles: kbench.capture.cupti), 200 repetitions a round: cold (nothing ran before), then after
back-to-back GEMMs heated the GPU for the given seconds (default 20), back to back and with the GPU resting in a
one-thread spin for 1x and 3x the GEMM's time after each repetition. Printed per round: the median duration and its
interquartile spread, the probes' median/min/max SM clock, how many repetitions ran within 1% of the round's top
clock and their median duration, and the median of duration x clock (SM cycles per GEMM: constant when the clock
alone explains the changes), with NVML's SM clock read after the round for comparison.
"""

from __future__ import annotations

import statistics
import sys
import time

import torch

from kbench.analysis.timing_stats import TimingStats
from kbench.capture.cupti import Repetitions, time_cupti
from kbench.capture.gpu import active_device
from kbench.capture.prepare import prepare_on_gpu
from kbench.capture.timing import L2Flush, l2_flush_bytes
from kbench.plan.discovery import load_version
from tests.benchmark.bench_fidelity import sm_mhz

REPS = 200
STEADY_PCT = 1.0  # a repetition within this much of the round's top probe clock counts as "at the top clock"


def row(label: str, got: Repetitions | str) -> None:
    if isinstance(got, str):
        print(f"{label:<26}{got}")
        return
    t = TimingStats.of(got.us)
    mhz = [m for m in got.sm_mhz if m is not None]
    top = max(mhz)
    at_top = [u for u, m in zip(got.us, got.sm_mhz, strict=True) if m is not None and m >= top * (1 - STEADY_PCT / 100)]
    cycles = statistics.median(u * m for u, m in zip(got.us, got.sm_mhz, strict=True) if m is not None)
    print(
        f"{label:<26}{t.median_us:>9.2f}{t.spread_pct:>8.2f}{statistics.median(mhz):>8.0f}{min(mhz):>7.0f}"
        f"{top:>7.0f}{len(at_top):>7}{statistics.median(at_top):>9.2f}{cycles / 1e3:>11.1f}{sm_mhz():>7}"
    )


def main() -> None:
    heat_s = float(sys.argv[1]) if len(sys.argv) > 1 else 20.0
    plan = load_version("matmul", "base").from_values({})
    fn = prepare_on_gpu(plan, active_device(), seed=0).stages[0].launch.fn
    flush = L2Flush(l2_flush_bytes())
    print(f"matmul base 4096^3 bf16, {REPS} repetitions a round; heating {heat_s:.0f} s of back-to-back GEMMs")
    print(
        f"{'round':<26}{'med us':>9}{'IQR %':>8}{'MHz med':>8}{'min':>7}{'top':>7}{'at top':>7}{'top us':>9}"
        f"{'kcycles':>11}{'NVML':>7}"
    )
    row("cold, back to back", time_cupti(fn, REPS, flush))
    first = time_cupti(fn, 20, flush)
    kernel_us = statistics.median(first.us) if isinstance(first, Repetitions) else 250.0
    for rest_x in (0, 1, 3, 0):
        end = time.monotonic() + heat_s
        while time.monotonic() < end:
            for _ in range(50):
                fn()
            torch.cuda.synchronize()
        cycles = int(rest_x * kernel_us * 1980)

        def spaced(cycles: int = cycles) -> None:
            flush()
            if cycles:
                torch.cuda._sleep(cycles)

        row(f"hot, rest {rest_x}x the GEMM", time_cupti(fn, REPS, spaced))


if __name__ == "__main__":
    main()
