"""Can spacing repetitions keep an unlocked GPU at a steady clock? `python -m tests.benchmark.steady_clock`.

A 4096^3 bf16 GEMM (matmul base) timed by CUPTI, 100 repetitions per round, three rounds per setting: back to back
(flush, GEMM, flush, GEMM...) and with the GPU idling in a spin (torch.cuda._sleep, one thread) for 1x and 3x the
GEMM's time after each. Printed: each round's median and interquartile spread, and the SM clock NVML read after it.
"""

from __future__ import annotations

import statistics

import torch

from kbench.analysis.timing_stats import TimingStats
from kbench.capture.cupti import time_cupti
from kbench.capture.gpu import active_device
from kbench.capture.prepare import prepare_on_gpu
from kbench.capture.timing import L2Flush, l2_flush_bytes
from kbench.plan.discovery import load_version
from tests.benchmark.bench_fidelity import sm_mhz

CYCLES_PER_US = 1980  # the spin's length in SM cycles per microsecond at the top clock


def main() -> None:
    plan = load_version("matmul", "base").from_values({})
    fn = prepare_on_gpu(plan, active_device(), seed=0).stages[0].launch.fn
    flush = L2Flush(l2_flush_bytes())
    first = time_cupti(fn, 20, flush)
    kernel_us = statistics.median(first) if isinstance(first, list) else 250.0
    print(f"matmul base 4096^3 bf16; a repetition ~{kernel_us:.0f} us")
    print(f"{'rest after each':<18}{'round':>6}{'median us':>11}{'spread %':>10}{'min us':>9}{'SM MHz':>8}")
    for factor in (0, 1, 3, 0):
        rest = int(factor * kernel_us * CYCLES_PER_US)

        def spaced(rest: int = rest) -> None:
            flush()
            if rest:
                torch.cuda._sleep(rest)

        for rnd in (1, 2, 3):
            got = time_cupti(fn, 100, spaced)
            if not isinstance(got, list):
                print(f"{factor}x: {got}")
                continue
            t = TimingStats.of(got)
            row = f"{t.median_us:>11.2f}{t.spread_pct:>10.2f}{t.min_us:>9.2f}{sm_mhz():>8}"
            print(f"{f'{factor}x the GEMM':<18}{rnd:>6}{row}")


if __name__ == "__main__":
    main()
