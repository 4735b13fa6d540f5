"""CUDA-event timing, the only place that times: warm-up, L2 flush between repetitions, many repetitions.

Every sample is kept (no outlier dropping); statistics come from ``analysis.timing_stats``. With
``cuda_graph`` the callable is captured once into a CUDA graph and each repetition replays it, which removes
the CPU launch overhead from the measured region.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

WARMUP_MS = 100.0  # long enough for unlocked clocks to settle under load
MIN_WARMUP = 3
MAX_WARMUP = 10_000
# Before each start event the GPU spins this many cycles (~0.2 ms at 2 GHz): the CPU enqueues start, the launch
# and end meanwhile, so Python/Triton launch overhead never sits inside the timed region.
HOLD_CYCLES = 400_000
# A repetition whose start event the GPU reached before the host had enqueued its end is timed again with the hold
# doubled, up to this (~13 ms at 2 GHz: past a 5 ms GIL switch interval), at most RETIME_X x reps extra times.
MAX_HOLD_CYCLES = 64 * HOLD_CYCLES
RETIME_X = 2


class L2Flush:
    """Leaves L2 cold and clean: a read of a buffer twice its size (summed into one float), so the lines a timed
    kernel wrote are written back during the flush, not during the next timed kernel (a write flush, ``zero_()``,
    leaves ~50 MB of dirty lines whose write-back the next kernel pays: +5 to +9 us measured on an H100)."""

    def __init__(self, nbytes: int, write: bool = False) -> None:
        import torch

        self.nbytes, self.write = nbytes, write  # write: the old flush (zero_()), kept for comparison
        self.buffer = torch.zeros(max(nbytes // 4, 1), dtype=torch.float32, device="cuda")
        self.sink = torch.zeros((), dtype=torch.float32, device="cuda")

    def __call__(self) -> None:
        import torch

        if self.write:
            self.buffer.zero_()
        else:
            torch.sum(self.buffer, dim=0, out=self.sink)

    @property
    def words(self) -> str:
        if self.write:
            return f"L2 flushed by writing {self.nbytes >> 20} MiB (dirty lines left)"
        return f"L2 flushed by reading {self.nbytes >> 20} MiB (no dirty lines left)"


@dataclass(frozen=True)
class Late:
    """Repetitions whose start event the GPU reached before the host had enqueued the repetition's end (the host
    stalled: another thread holding the GIL, a slow launch), so a host gap may sit inside the timed region."""

    retimed: int  # timed again with a longer hold, their first timing not kept
    kept: int  # still late when the retries ran out (or with no hold to raise): kept, and said so
    hold_cycles: int  # the hold after the last repetition (doubled after each late one)

    @property
    def words(self) -> str:
        said = []
        if self.retimed:
            said.append(
                f"{self.retimed} repetition(s) timed again, the GPU having reached their start before the host had"
                f" enqueued their end (the hold raised to {self.hold_cycles} cycles)"
            )
        if self.kept:
            said.append(f"{self.kept} repetition(s) kept although the host was late (a host gap may be inside them)")
        return "; ".join(said)


@dataclass(frozen=True)
class Samples:
    us: list[float]
    warmup_reps: int
    cuda_graph: bool
    flush: str  # how L2 was flushed before each repetition ("no flush" when it was not)
    held: bool = False
    late: Late | None = None  # repetitions the host enqueued too slowly (None: not checked)

    @property
    def method(self) -> str:
        how = "CUDA-graph replay" if self.cuda_graph else "eager launches"
        flush = f"{self.flush} before each" if self.flush != "no flush" else self.flush
        hold = ", GPU held before each start so launch overhead stays outside the timed region" if self.held else ""
        late = f"; {self.late.words}" if self.late is not None and self.late.words else ""
        return f"CUDA events, {how}, {flush}{hold}, {self.warmup_reps} warm-up + {len(self.us)} timed repetitions{late}"


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
    write_flush: bool = False,
) -> Samples:
    """Time ``fn`` ``reps`` times with CUDA events; returns every sample in microseconds.

    ``flush_bytes`` overrides the L2 flush size (default twice the L2); ``hold_cycles=0`` disables the hold;
    ``write_flush`` flushes by writing (the old way, for comparison: the next kernel pays the write-back).
    """
    import torch

    if flush_bytes is None:
        flush_bytes = l2_flush_bytes() if flush else 0
    scratch = L2Flush(flush_bytes, write_flush) if flush_bytes else None
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

    warmup, _ = _warmed(run)
    [samples], late = _repetitions([run], reps, scratch, hold_cycles)
    held = hold_cycles > 0 and hasattr(torch.cuda, "_sleep")
    return Samples(samples, warmup, cuda_graph, scratch.words if scratch else "no flush", held=held, late=late)


def time_interleaved(
    fns: Sequence[Callable[[], object]],
    reps: int,
    *,
    rest_x: float = 0.0,
    hold_cycles: int = HOLD_CYCLES,
    scratch: L2Flush | None = None,
) -> list[Samples]:
    """Time several callables in turn inside each repetition (a, b, a, b, ...), each after an L2 flush, so that
    all of them meet the same clock states: what compares them (an instrumented kernel against the plain one) is
    not confounded by the clock falling under a long run. ``rest_x`` > 0: the GPU rests (a one-thread spin) that
    many times the repetition's duration before each, so an unlocked clock stays up (capped at MAX_REST_US).
    ``scratch``: the flush to use (default: a new one, twice the L2)."""
    import torch

    from kbench.capture.cupti import CYCLES_PER_US, MAX_REST_US

    scratch = scratch or L2Flush(l2_flush_bytes())
    warmups, one_us = [], 0.0
    for fn in fns:
        fn()  # compile / load first
        warm, ms = _warmed(fn)
        warmups.append(warm)
        one_us += 1e3 * ms
    rest = int(min(rest_x * one_us, MAX_REST_US) * CYCLES_PER_US) if rest_x > 0 else 0
    rested = f", the GPU resting {rest_x:g}x the repetition's duration before each" if rest else ""
    found, late = _repetitions(fns, reps, scratch, hold_cycles, rest)
    held = hold_cycles > 0 and hasattr(torch.cuda, "_sleep")
    return [
        Samples(us, warm, False, scratch.words + rested, held=held, late=late)
        for us, warm in zip(found, warmups, strict=True)
    ]


TUNE_REPS = 100  # repetitions of each tuning candidate, as many as a stage's default timing takes


def time_candidates(fns: Sequence[Callable[[], object]], reps: int = TUNE_REPS) -> list[list[float]]:
    """The autotuner's timer: every candidate timed as stages are (warm-up, L2 flushed and the GPU held before each
    repetition), interleaved (time_interleaved), so a clock drifting during the tuning meets all of them alike;
    each candidate's samples in microseconds."""
    return [s.us for s in time_interleaved(fns, reps)]


def _warmed(run: Callable[[], object]) -> tuple[int, float]:
    """Warm ``run`` up for at least WARMUP_MS of work, sized from one timed call; (warm-up calls, that call's ms)."""
    import torch

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    run()
    end.record()
    torch.cuda.synchronize()
    one_ms = max(start.elapsed_time(end), 1e-3)
    warmup = max(MIN_WARMUP, min(MAX_WARMUP, int(WARMUP_MS / one_ms)))
    for _ in range(warmup):
        run()
    return warmup, one_ms


def _repetitions(
    runs: Sequence[Callable[[], object]], reps: int, scratch: L2Flush | None, hold_cycles: int, rest: int = 0
) -> tuple[list[list[float]], Late]:
    """``reps`` repetitions; in each, every run in turn after the flush and the hold, between CUDA events (and the
    rest's spin first). Microseconds per run, and the repetitions found late (see Late)."""
    import torch

    spin = getattr(torch.cuda, "_sleep", None)  # a GPU-side one-thread spin
    hold = hold_cycles if hold_cycles > 0 and spin is not None else 0
    clean: list[list[tuple[Any, Any]]] = []
    stale: list[list[tuple[Any, Any]]] = []
    retimed = 0
    while len(clean) < reps:
        batch = []
        for _ in range(reps - len(clean)):
            if rest and spin is not None:
                spin(rest)
            events, late = [], False
            for run in runs:
                if scratch is not None:
                    scratch()
                if hold and spin is not None:
                    spin(hold)
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                run()
                end.record()
                late = late or bool(start.query())  # the GPU already passed start: it may have waited for the host
                events.append((start, end))
            if late and hold:
                hold = min(2 * hold, MAX_HOLD_CYCLES)  # the next repetitions get a longer hold at once
            batch.append((events, late))
        torch.cuda.synchronize()
        clean += [events for events, late in batch if not late]
        stale = [events for events, late in batch if late]
        if not stale or not hold or retimed + len(stale) > RETIME_X * reps:
            break
        retimed += len(stale)
    timed = clean + stale  # the late ones only where the retries ran out, and counted
    us = [[1000.0 * s.elapsed_time(e) for s, e in (events[k] for events in timed)] for k in range(len(runs))]
    return us, Late(retimed=retimed, kept=len(stale), hold_cycles=hold)
