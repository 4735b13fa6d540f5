"""Does the GPU's recent history move event mode's CUPTI figure for a power-limited GEMM? (issue 30, fidelity)

On a CUDA machine, clocks left alone: fork_join's mm stage (4096^3 bf16) timed as bench_fidelity's in-process rounds
do (100 CUDA-event repetitions with the write flush, 100 with the read flush, then three CUPTI rounds rested as event
mode rests an unlocked GPU), with an extra idle wait of 0, 1 or 5 s (host sleep, GPU idle) between the event
repetitions and the CUPTI rounds, twice each; and once with no event repetitions before at all. Per round: the median,
the median of its first 30 and of its last 70 repetitions, and the GPU-side probe's clock; NVML's clock-event reasons
after each setting. Usage: python scripts/fidelity-settle.py
"""

from __future__ import annotations

import os
import statistics
import time

from kbench.capture.cupti import REST_X, Repetitions, after_events, time_cupti
from kbench.capture.gpu import active_device
from kbench.capture.prepare import prepare_on_gpu
from kbench.capture.timing import L2Flush, l2_flush_bytes, time_cuda
from kbench.plan.discovery import load_version

REPS = 100


def reasons() -> str:
    """NVML's current clock-event (throttle) reasons, by name, or n/a."""
    from kbench.capture import nvml

    with nvml.current_gpu() as found:
        if found is None:
            return "n/a"
        nv, handle = found
        try:
            mask = nv.nvmlDeviceGetCurrentClocksEventReasons(handle)
        except Exception as e:  # a diagnostic: say what NVML said
            return f"n/a ({e})"
        names = [n for n in dir(nv) if n.startswith("nvmlClocksEventReason") and not n.endswith(("All", "None"))]
        hit = sorted({n.removeprefix("nvmlClocksEventReason") for n in names if mask & int(getattr(nv, n))})
        return ",".join(hit) or "none"


def main() -> None:
    import torch

    os.environ["KBENCH_LOCK_CLOCKS"] = "0"
    device = active_device()
    flush = L2Flush(l2_flush_bytes())
    plan = load_version("fork_join", "serial").from_values({})
    prep = prepare_on_gpu(plan, device, seed=0)
    mm = next(ps for ps in prep.stages if ps.stage.name == "mm")
    print(f"device: {device.name}; fork_join serial mm; {REPS} repetitions per round; medians in us")
    print(f"{'setting':<28}{'round':>6}{'median':>9}{'first 30':>10}{'last 70':>9}{'probe MHz':>10}")
    settings = [("no event reps before", None), *((f"events, then idle {s:g} s", s) for s in (0.0, 1.0, 5.0))]
    for trial in range(2):
        for label, idle_s in settings:
            if idle_s is None:
                torch.cuda.synchronize()
                time.sleep(5.0)
                reads = time_cuda(mm.launch.fn, 3).us  # three repetitions only: the rests' length, little heat
            else:
                time_cuda(mm.launch.fn, REPS, write_flush=True)
                reads = time_cuda(mm.launch.fn, REPS).us
                torch.cuda.synchronize()
                time.sleep(idle_s)
            rests = after_events(reads, REST_X)
            if idle_s is None:
                rests["settle_us"] = 0.0
            for r in range(3):
                got = time_cupti(mm.launch.fn, REPS, flush, **rests)
                if not isinstance(got, Repetitions):
                    print(f"{label:<28}{r + 1:>6}  no figure: {got}")
                    continue
                mhz = [m for m in got.sm_mhz if m is not None]
                print(
                    f"{label:<28}{r + 1:>6}{statistics.median(got.us):>9.2f}{statistics.median(got.us[:30]):>10.2f}"
                    f"{statistics.median(got.us[30:]):>9.2f}{statistics.median(mhz) if mhz else float('nan'):>10.0f}"
                )
            print(f"{'':<28}  trial {trial + 1}; NVML clock-event reasons now: {reasons()}")


if __name__ == "__main__":
    main()
