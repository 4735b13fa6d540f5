"""The GPU's libraries initialised on another core while a process imports the plan and torch.

A profiling process asks NVML (the GPU's name, its clocks) and the CUDA driver (which device, and for the plan's
own process a context) before its first measurement. On the H100 machine NVML's initialisation is ~0.25 s each
time a process opens it after closing it, cuInit ~0.23 s, and under ncu cuInit is where ncu's injection connects
(~0.5 s) before ~0.3 s of context creation; the imports they wait behind take 1.3-1.4 s (torch) or ~0.5 s (the
plan and Triton). Each call here goes through ctypes, which releases Python's lock, so the imports run on.
Measured under ncu, the profiled child took 5.68-5.76 s instead of 6.51-6.55 s. Best effort: where a library is
missing nothing is warmed, and the run reports what is missing when it needs it, as before.
"""

from __future__ import annotations

import threading


def start(context: bool) -> threading.Thread | None:
    """Initialise NVML (kept open) and the CUDA driver in a daemon thread; with ``context`` also create device 0's
    primary context (a process that runs the plan itself). The thread, or None without a CUDA driver."""
    from kbench.capture import cuda_driver

    if cuda_driver.library() is None:  # loaded here: dlopen holds Python's lock, the calls in the thread do not
        return None
    thread = threading.Thread(target=_warm, args=(context,), name="kbench-gpu-warmup", daemon=True)
    thread.start()
    return thread


def _warm(context: bool) -> None:
    from kbench.capture import cuda_driver, nvml

    nvml.hold()
    if context:
        cuda_driver.retain_primary()
    else:
        cuda_driver.first_device()
