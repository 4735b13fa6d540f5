"""What opening PM sampling costs for each hardware-buffer size, and whether a collector held open in one process
keeps ncu in another from profiling (issue 43: may a long-lived kbench keep its sampler between runs?).

    python3 scripts/pm-sampling-costs.py   (on a CUDA machine with cupti-python; prints one line per finding)
"""

from __future__ import annotations

import sys
import time

from kbench.capture import tools

WORK = "import torch; x = torch.ones(1 << 24, device='cuda'); y = x + 1; torch.cuda.synchronize()"
METRICS = ["dram__throughput.avg.pct_of_peak_sustained_elapsed", "sm__cycles_active.avg"]


def ncu() -> str:
    argv = ["ncu", "--clock-control", "none", "--metrics", "gpu__time_duration.sum", sys.executable, "-c", WORK]
    done = tools.output(argv, timeout_s=120)
    lines = [ln for ln in done.log.splitlines() if "==ERROR==" in ln or "duration" in ln]
    return f"rc {done.returncode}: {' | '.join(lines)[:300]}"


def main() -> None:
    import torch
    from cupti import pm_sampling

    torch.cuda.init()
    for mb in (512, 128, 64, 32):
        c = pm_sampling.Collector(0)
        t = time.perf_counter()
        c.enable()
        enabled = time.perf_counter()
        c.configure(metrics=METRICS, hardware_buffer_size=mb << 20, sampling_interval=20_000)
        configured = time.perf_counter()
        c.disable()
        print(
            f"buffer {mb} MB: enable {enabled - t:.3f} s, configure {configured - enabled:.3f} s, "
            f"disable {time.perf_counter() - configured:.3f} s",
            flush=True,
        )
    print("ncu with no collector here:", ncu(), flush=True)
    c = pm_sampling.Collector(0)
    c.enable()
    c.configure(metrics=METRICS, hardware_buffer_size=64 << 20, sampling_interval=20_000)
    print("ncu while a collector is enabled and configured here:", ncu(), flush=True)
    c.start()
    print("ncu while this process samples:", ncu(), flush=True)
    c.stop()
    c.disable()
    print("ncu after it is disabled:", ncu(), flush=True)


if __name__ == "__main__":
    main()
