"""Ceilings measured at run time, for a GPU that conf/devices.json does not know.

They are used only to classify the bottleneck (the report says so); the roofline columns stay n/a, since
no datasheet peak exists for the device and none is borrowed from another.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable

from kbench.analysis.roofline import Ceilings
from kbench.analysis.timing_stats import TimingStats
from kbench.capture.timing import time_cuda

COPY_BYTES = 1 << 30
MM_SIZE = 8192
SOURCE = "measured at run time on this unknown device (1 GiB device copy; torch.mm at 8192^3), not datasheet values"


def _copy_gbps(reps: int) -> float:
    """Device-to-device copy bandwidth, counting bytes read plus bytes written."""
    import torch

    src = torch.empty(COPY_BYTES // 4, dtype=torch.float32, device="cuda")
    dst = torch.empty_like(src)
    us = TimingStats.of(time_cuda(lambda: dst.copy_(src), reps, flush=False).us).median_us
    return 2 * COPY_BYTES / (us * 1e-6) / 1e9


def measure(precisions: Iterable[str], reps: int = 10) -> dict[str, Ceilings]:
    import torch

    gbps = _copy_gbps(reps)
    dtypes = {
        "bf16": torch.bfloat16,
        "fp16": torch.float16,
        "fp32": torch.float32,
        "tf32": torch.float32,
        "fp64": torch.float64,
    }
    out: dict[str, Ceilings] = {}
    for p in sorted(set(precisions)):
        if p not in dtypes:
            continue  # no library matmul to measure it with: that precision stays unclassified
        a = torch.randn(MM_SIZE, MM_SIZE, device="cuda").to(dtypes[p])
        b = torch.randn(MM_SIZE, MM_SIZE, device="cuda").to(dtypes[p])
        old = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = p == "tf32"
        try:
            us = TimingStats.of(time_cuda(functools.partial(torch.mm, a, b), reps, flush=False).us).median_us
        finally:
            torch.backends.cuda.matmul.allow_tf32 = old
        out[p] = Ceilings(tflops=2 * MM_SIZE**3 / (us * 1e-6) / 1e12, gbps=gbps, source=SOURCE)
    return out
