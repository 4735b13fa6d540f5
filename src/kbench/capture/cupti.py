"""Stage durations from the GPU's own timestamps: CUPTI activity records, through PyTorch's profiler (its Kineto entry
points; torch.profiler where those differ).

A stage is run ``reps`` times, each after an L2 flush, with only CUDA activity recorded; its GPU work (kernels,
memsets, memcpys, in time order) is cut into repetitions by counting: one call of the flush is traced alone once
(per capture) to learn how many items it puts on the GPU, and each repetition holds that many plus the stage's.
A repetition's duration is the sum of its stage items' durations (the gaps between a stage's kernels are launch
overhead, which CUDA events measure and CUPTI does not). When the counts do not add up, or CUPTI records nothing,
there is no CUPTI figure and the reason says why: event mode then keeps its CUDA-event figure.

The SM clock of each repetition is read on the GPU itself: a clock probe (two one-thread spins of a known number of
SM cycles, ``torch.cuda._sleep``) runs right before and right after the stage; the difference of the two spins'
CUPTI durations is a known cycle count over a measured time, which is the clock (MHz = cycles per microsecond) with
the launch's fixed cost cancelled. NVML's samples (every ~20 ms) miss the power limiter's short dips; this does not.
"""

from __future__ import annotations

import json
import statistics
import tempfile
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

GPU_WORK = ("kernel", "gpu_memset", "gpu_memcpy")  # Chrome-trace categories of work that runs on the GPU
PROBE_CYCLES = (2_000, 22_000)  # the clock probe's short and long spin, SM cycles (~1 and ~11 us at 1980 MHz)
REST_X = 3.0  # unlocked clocks: the GPU rests (a one-thread spin) this many times the stage's duration before each
MAX_REST_US = 5_000.0  # ... but at most this long (100 repetitions of a 10 ms stage would otherwise rest 3 s)
MAX_SETTLE_US = 200_000.0  # the longest settling rest before the first repetition (see ``spins``)
CYCLES_PER_US = 1_980  # the rest's length in SM cycles per microsecond (an H100/H200's top clock; only a length)


@dataclass(frozen=True)
class Repetitions:
    """CUPTI's figures for ``reps`` repetitions of a stage."""

    us: list[float]  # each repetition's stage duration
    sm_mhz: list[float | None]  # each repetition's SM clock from the probes around it (None: not probed/readable)


def probe() -> None:
    """The clock probe: a short then a long one-thread spin of known SM cycles."""
    import torch

    for cycles in PROBE_CYCLES:
        torch.cuda._sleep(cycles)


def probe_mhz(short_us: float, long_us: float) -> float | None:
    """The SM clock the probe ran at: the two spins' cycle difference over their duration difference."""
    took = long_us - short_us
    return (PROBE_CYCLES[1] - PROBE_CYCLES[0]) / took if took > 0 else None


def gpu_items(trace: dict[str, Any]) -> list[tuple[float, float]]:
    """(start, duration) in microseconds of every piece of GPU work in a PyTorch-profiler Chrome trace, in time
    order."""
    items = [
        (float(e["ts"]), float(e.get("dur", 0.0)))
        for e in trace.get("traceEvents", [])
        if e.get("cat") in GPU_WORK and e.get("ph") == "X"
    ]
    return sorted(items)


def per_repetition(
    items: Sequence[tuple[float, float]], flush: int, stage: int, reps: int, probed: bool = False
) -> Repetitions | str:
    """Each repetition's stage duration (its ``stage`` items summed, after ``flush`` items of the flush and, when
    ``probed``, between two clock probes) and clock, or why the items cannot be cut that way."""
    if stage <= 0:
        return "the stage put no work on the GPU that CUPTI recorded"
    side = len(PROBE_CYCLES) if probed else 0
    per = flush + side + stage + side
    if len(items) != per * reps:
        probes = f" + 2 x {side} probe" if probed else ""
        return f"CUPTI recorded {len(items)} GPU activities, not {reps} x ({flush} flush{probes} + {stage} stage)"
    us: list[float] = []
    mhz: list[float | None] = []
    for r in range(reps):
        rep = items[r * per : (r + 1) * per]
        us.append(sum(d for _, d in rep[flush + side : flush + side + stage]))
        if not probed:
            mhz.append(None)
            continue
        sides = [probe_mhz(rep[i][1], rep[i + 1][1]) for i in (flush, per - side)]
        read = [m for m in sides if m is not None]
        mhz.append(sum(read) / len(read) if read else None)
    return Repetitions(us, mhz)


class Rests(TypedDict):
    rest_us: float
    settle_us: float


def after_events(events_us: list[float], rest_x: float) -> Rests:
    """``time_cupti``'s rests for a stage just timed by back-to-back CUDA-event repetitions ``events_us``: ``rest_x``
    times its median before each repetition, and before the first ``rest_x`` times what those repetitions took
    together (the rests they did not take). ``rest_x`` 0 (clocks locked): none."""
    return Rests(rest_us=rest_x * statistics.median(events_us), settle_us=rest_x * sum(events_us))


def spins(reps: int, rest_us: float, settle_us: float = 0.0) -> list[int]:
    """The rest before each repetition, in SM cycles (all 0: no rest). The first is at least ``settle_us``: work that
    ran just before without rests (CUDA-event repetitions of the same stage) leaves an unlocked clock pulled down.
    Measured on the H100 (4096^3 bf16 GEMM right after 100 back-to-back event repetitions): the first ~30 CUPTI
    repetitions ran at 1788-1845 MHz and 2-3% slower, the rest at ~1960 MHz."""
    rest = int(min(rest_us, MAX_REST_US) * CYCLES_PER_US)
    if rest <= 0:
        return [0] * reps
    first = max(rest, int(min(settle_us, MAX_SETTLE_US) * CYCLES_PER_US))
    return [first, *[rest] * (reps - 1)][:reps]


def _traced(body: Callable[[], object]) -> list[tuple[float, float]]:
    """(start, duration) in microseconds of every piece of GPU work ``body`` puts on the GPU, in time order: CUPTI's
    activity records through the autograd profiler's own entry points (``_kineto``), or, where those are not there
    as this torch has them, through torch.profiler and its Chrome trace (``_chrome``)."""
    try:
        session = kineto_session()
    except (ImportError, AttributeError, TypeError):  # a torch whose private profiler API differs
        return _chrome(body)
    return _kineto(body, session)


def kineto_session(cpu: bool = False) -> tuple[Any, Any]:
    """The Kineto profiler's configuration for CUDA activity (and CPU ops, ``cpu``), and its activities.
    torch.profiler's own first session imports torch._dynamo, sympy and FSDP (5.1 s of a fresh process on the H100,
    where Python compiles them each time; seconds even from cached bytecode); these entry points need none of it."""
    from torch._C._profiler import ProfilerActivity, ProfilerConfig, ProfilerState, _ExperimentalConfig

    config = ProfilerConfig(ProfilerState.KINETO, False, False, False, False, False, _ExperimentalConfig())
    return config, {ProfilerActivity.CUDA, *([ProfilerActivity.CPU] if cpu else [])}


def profiler_failed(e: BaseException) -> str:
    """Why a profiler session gave nothing, in one line."""
    return f"the PyTorch profiler failed: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"


def in_session(body: Callable[[], object], session: tuple[Any, Any]) -> Any:
    """``body()`` inside one Kineto session (``kineto_session``'s configuration and activities), its GPU work
    finished before the session ends; the profiler's result (the CUPTI timing, the census and the sampling round
    each read theirs from it)."""
    import torch
    from torch._C._autograd import _disable_profiler, _enable_profiler, _prepare_profiler

    config, activities = session
    torch.cuda.synchronize()
    _prepare_profiler(config, activities)
    _enable_profiler(config, activities)
    try:
        body()
        torch.cuda.synchronize()
    finally:
        result = _disable_profiler()
    return result


def gpu_events(result: Any) -> list[tuple[str, int, int]]:
    """The GPU work a session's result recorded: (name, start ns, duration ns), in start order."""
    from torch._C._autograd import DeviceType

    found = [
        (str(e.name()), int(e.start_ns()), int(e.duration_ns()))
        for e in result.events()
        if e.device_type() == DeviceType.CUDA
    ]
    return sorted(found, key=lambda i: i[1])


def _kineto(body: Callable[[], object], session: tuple[Any, Any]) -> list[tuple[float, float]]:
    return sorted((start / 1e3, dur / 1e3) for _, start, dur in gpu_events(in_session(body, session)))


def _chrome(body: Callable[[], object]) -> list[tuple[float, float]]:
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
    fn: Callable[[], object],
    reps: int,
    flush: Callable[[], object] | None,
    flush_items: int | None = None,
    probed: bool = True,
    rest_us: float = 0.0,
    settle_us: float = 0.0,
) -> Repetitions | str:
    """``reps`` CUPTI durations of ``fn`` in microseconds, each after ``flush``, a rest of ``rest_us`` (a one-thread
    spin: the power limiter's average falls, so an unlocked clock stays up; the first rest lasts at least
    ``settle_us``, see ``spins``) and between clock probes when ``probed``; or why there are none. One profiler
    session: the stage's own item count is what each repetition holds beyond the flush's (``flush_items``, counted
    here when not given), the rest's and the probes'."""
    import torch

    torch.cuda.synchronize()
    try:
        flushed = (flush_items if flush_items is not None else work_items(flush)) if flush is not None else 0
        rests = spins(reps, rest_us, settle_us)
        flushed += 1 if rests and rests[0] > 0 else 0  # the rest is one more item before the stage

        def body() -> None:
            for rest in rests:
                if flush is not None:
                    flush()
                if rest > 0:
                    torch.cuda._sleep(rest)
                if probed:
                    probe()
                fn()
                if probed:
                    probe()

        items = _traced(body)
        extra = flushed + (2 * len(PROBE_CYCLES) if probed else 0)
        stage = len(items) // reps - extra if len(items) % reps == 0 else -1
        if stage < 0:
            return f"CUPTI recorded {len(items)} GPU activities, not a whole number per repetition ({reps})"
        return per_repetition(items, flushed, stage, reps, probed)
    except (RuntimeError, OSError, ValueError, KeyError) as e:  # the profiler or CUPTI not usable here
        return profiler_failed(e)
