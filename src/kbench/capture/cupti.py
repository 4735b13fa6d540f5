"""Stage durations from the GPU's own timestamps: CUPTI activity records, through PyTorch's profiler.

A stage is run ``reps`` times, each after an L2 flush, with only CUDA activity recorded; its GPU work (kernels,
memsets, memcpys, in time order) is cut into repetitions by counting: one call of the flush is traced alone once
(per capture) to learn how many items it puts on the GPU, and each repetition holds that many plus the stage's.
A repetition's duration is the sum of its stage items' durations (the gaps between a stage's kernels are launch
overhead, which CUDA events measure and CUPTI does not). When the counts do not add up, or CUPTI records nothing,
there is no CUPTI figure and the reason says why: event mode then keeps its CUDA-event figure.
"""

from __future__ import annotations

import json
import tempfile
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

GPU_WORK = ("kernel", "gpu_memset", "gpu_memcpy")  # Chrome-trace categories of work that runs on the GPU


def gpu_items(trace: dict[str, Any]) -> list[tuple[float, float]]:
    """(start, duration) in microseconds of every piece of GPU work in a PyTorch-profiler Chrome trace, in time
    order."""
    items = [
        (float(e["ts"]), float(e.get("dur", 0.0)))
        for e in trace.get("traceEvents", [])
        if e.get("cat") in GPU_WORK and e.get("ph") == "X"
    ]
    return sorted(items)


def per_repetition(items: Sequence[tuple[float, float]], flush: int, stage: int, reps: int) -> list[float] | str:
    """Each repetition's stage duration (its ``stage`` items summed, after ``flush`` items of the flush), or why
    the items cannot be cut that way."""
    if stage <= 0:
        return "the stage put no work on the GPU that CUPTI recorded"
    per = flush + stage
    if len(items) != per * reps:
        return f"CUPTI recorded {len(items)} GPU activities, not {reps} x ({flush} flush + {stage} stage)"
    return [sum(d for _, d in items[r * per + flush : (r + 1) * per]) for r in range(reps)]


def _traced(body: Callable[[], object]) -> list[tuple[float, float]]:
    import torch
    from torch.profiler import ProfilerActivity, profile

    with warnings.catch_warnings():
        # one profiling cycle per trace: the profiler's note that it keeps only the current cycle does not apply
        warnings.filterwarnings("ignore", message=".*Profiler clears events at the end of each cycle")
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            body()
            torch.cuda.synchronize()
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "trace.json"
            prof.export_chrome_trace(str(path))
            return gpu_items(json.loads(path.read_text()))


def work_items(fn: Callable[[], object]) -> int:
    """How many pieces of GPU work one call of ``fn`` makes (one profiler session: count it once, reuse it)."""
    return len(_traced(fn))


def time_cupti(
    fn: Callable[[], object], reps: int, flush: Callable[[], object] | None, flush_items: int | None = None
) -> list[float] | str:
    """``reps`` CUPTI durations of ``fn`` in microseconds, each after ``flush``; or why there are none. One profiler
    session: the stage's own item count is what each repetition holds beyond the flush's (``flush_items``, counted
    here when not given)."""
    import torch

    torch.cuda.synchronize()
    try:
        flushed = (flush_items if flush_items is not None else work_items(flush)) if flush is not None else 0

        def body() -> None:
            for _ in range(reps):
                if flush is not None:
                    flush()
                fn()

        items = _traced(body)
        stage = len(items) // reps - flushed if len(items) % reps == 0 else -1
        if stage < 0:
            return f"CUPTI recorded {len(items)} GPU activities, not a whole number per repetition ({reps})"
        return per_repetition(items, flushed, stage, reps)
    except (RuntimeError, OSError, ValueError, KeyError) as e:  # the profiler or CUPTI not usable here
        return f"the PyTorch profiler failed: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
