"""CUDA-event timing, the only place that times: warm-up, L2 flush between repetitions, many repetitions.

Every sample is kept (no outlier dropping); statistics come from ``analysis.timing_stats``. With
``cuda_graph`` the callable is captured once into a CUDA graph and each repetition replays it, which removes
the CPU launch overhead from the measured region.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

WARMUP_MS = 100.0  # long enough for unlocked clocks to settle under load
MIN_WARMUP = 3
MAX_WARMUP = 10_000
# Before each start event the GPU spins this many cycles (~0.2 ms at 2 GHz): the CPU enqueues start, the launch
# and end meanwhile, so Python/Triton launch overhead never sits inside the timed region.
HOLD_CYCLES = 400_000


@dataclass(frozen=True)
class Samples:
    us: list[float]
    warmup_reps: int
    cuda_graph: bool
    l2_flush_bytes: int
    held: bool = False

    @property
    def method(self) -> str:
        how = "CUDA-graph replay" if self.cuda_graph else "eager launches"
        flush = f"L2 flushed ({self.l2_flush_bytes >> 20} MiB write) before each" if self.l2_flush_bytes else "no flush"
        hold = ", GPU held before each start so launch overhead stays outside the timed region" if self.held else ""
        return f"CUDA events, {how}, {flush}{hold}, {self.warmup_reps} warm-up + {len(self.us)} timed repetitions"


def l2_flush_bytes() -> int:
    """Twice the device's L2, so each repetition starts with a cold cache."""
    import torch

    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    return 2 * int(getattr(props, "L2_cache_size", 0) or 64 << 20)


def time_cuda(
    fn: Callable[[], object],
    reps: int,
    *,
    cuda_graph: bool = False,
    flush: bool = True,
    flush_bytes: int | None = None,
    hold_cycles: int = HOLD_CYCLES,
) -> Samples:
    """Time ``fn`` ``reps`` times with CUDA events; returns every sample in microseconds.

    ``flush_bytes`` overrides the L2 flush size (default twice the L2); ``hold_cycles=0`` disables the hold.
    """
    import torch

    if flush_bytes is None:
        flush_bytes = l2_flush_bytes() if flush else 0
    scratch = torch.empty(flush_bytes // 4, dtype=torch.int32, device="cuda") if flush_bytes else None
    fn()  # compile / load before anything is timed or captured
    torch.cuda.synchronize()
    run: Callable[[], object] = fn
    if cuda_graph:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            fn()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            fn()
        run = graph.replay

    # size the warm-up from one timed call: at least WARMUP_MS of work
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    run()
    end.record()
    torch.cuda.synchronize()
    one_ms = max(start.elapsed_time(end), 1e-3)
    warmup = max(MIN_WARMUP, min(MAX_WARMUP, int(WARMUP_MS / one_ms)))
    for _ in range(warmup):
        run()

    hold = getattr(torch.cuda, "_sleep", None) if hold_cycles > 0 else None  # a GPU-side spin
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for i in range(reps):
        if scratch is not None:
            scratch.zero_()
        if hold is not None:
            hold(hold_cycles)
        starts[i].record()
        run()
        ends[i].record()
    torch.cuda.synchronize()
    samples = [1000.0 * s.elapsed_time(e) for s, e in zip(starts, ends, strict=True)]
    return Samples(samples, warmup, cuda_graph, flush_bytes, held=hold is not None)
