"""Timing fidelity per stage: `python -m tests.benchmark.bench_fidelity [--no-ncu]` on a CUDA machine.

For each stage of a few plans (a streaming add, a tiny add, a GEMM, the fork_join stages): the CUDA-event median
with the old write flush and with the read flush, the CUPTI median (kbench's stage duration), ncu's
gpu__time_duration from an annotation-mode run of the same plan, their ratios, and the SM clock NVML read right
after each measurement. Clocks are left alone (KBENCH_LOCK_CLOCKS=0 is set here).
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
from typing import Any

from kbench.capture.cupti import time_cupti
from kbench.capture.gpu import active_device
from kbench.capture.prepare import prepare_on_gpu
from kbench.capture.timing import L2Flush, l2_flush_bytes, time_cuda
from kbench.plan.discovery import load_version

REPS = 100
PLANS: list[tuple[str, str, dict[str, Any]]] = [
    ("vector_add", "base", {"n": 1 << 26}),
    ("vector_add", "base", {"n": 1 << 16}),
    ("matmul", "base", {"m": 2048, "n": 2048, "k": 2048}),
    ("fork_join", "serial", {}),
]


def sm_mhz() -> str:
    from kbench.capture import nvml

    with nvml.current_gpu() as found:
        if found is None:
            return "n/a"
        nv, handle = found
        return str(nv.nvmlDeviceGetClockInfo(handle, nv.NVML_CLOCK_SM))


def main() -> None:
    os.environ["KBENCH_LOCK_CLOCKS"] = "0"
    with_ncu = "--no-ncu" not in sys.argv
    device = active_device()
    flush = L2Flush(l2_flush_bytes())
    header = (
        f"{'plan':<26}{'stage':<9}{'ev write':>10}{'ev read':>10}{'CUPTI':>9}{'ncu':>9}{'read/CUPTI':>11}"
        f"{'CUPTI/ncu':>10}{'SM MHz':>8}"
    )
    print(f"device: {device.name}; {REPS} repetitions each; medians in us")
    print(header)
    for package, version, values in PLANS:
        plan = load_version(package, version).from_values(values)
        ncu: dict[str, float] = {}
        if with_ncu:
            from kbench.api import annotation_profile_plan

            with tempfile.TemporaryDirectory() as tmp:
                r = annotation_profile_plan(plan, out_dir=tmp)
                ncu = {s.name: s.duration_us for s in r.stages}
        prep = prepare_on_gpu(plan, device, seed=0)
        for ps in prep.stages:
            write = statistics.median(time_cuda(ps.launch.fn, REPS, write_flush=True).us)
            read = statistics.median(time_cuda(ps.launch.fn, REPS).us)
            got = time_cupti(ps.launch.fn, REPS, flush)
            mhz = sm_mhz()
            cupti = statistics.median(got) if isinstance(got, list) else None
            n = ncu.get(ps.stage.name)
            label = f"{package} {version} {','.join(f'{k}={v}' for k, v in values.items())}"[:25]
            print(
                f"{label:<26}{ps.stage.name:<9}{write:>10.2f}{read:>10.2f}"
                f"{cupti if cupti is not None else float('nan'):>9.2f}{n if n is not None else float('nan'):>9.2f}"
                f"{read / cupti if cupti else float('nan'):>11.3f}"
                f"{cupti / n if cupti and n else float('nan'):>10.3f}{mhz:>8}"
            )
            if not isinstance(got, list):
                print(f"  (no CUPTI figure: {got})")


if __name__ == "__main__":
    main()
