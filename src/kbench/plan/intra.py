"""The device side of the intra-kernel task timeline: a ``Profiler`` a Triton kernel creates from the buffer the
host hands it, and ``record``s around its tasks (load, mma, store, ...).

    profiler = Profiler.create(profiler_buffer=buf, group_id=0, num_groups=1, is_leader=True,
                               ENABLE_PROFILING=PROFILE)
    profiler = profiler.record(is_start=True, task_type=0)
    ...                                   # the task
    profiler = profiler.record(is_start=False, task_type=0)

``record`` returns a new profiler (Triton has no in-place mutation); with ``ENABLE_PROFILING=False`` (a
``tl.constexpr``) every record compiles away and the kernel is the plain one.

How a record is kept (one CTA, no atomics; layout in ``kbench.intra_layout``): the buffer (int64, made by
``kbench.capture.intra``) has one region per CTA; the region's first word holds the CTA's record count, its SM and
a written flag; each record is one word, the ``%globaltimer`` nanoseconds (low 47 bits) with the task type and
start/end bit. A CTA that records more than
its region holds keeps counting but stops writing, so the host sees the overflow and says so; nothing is dropped
silently. ``%globaltimer`` is one clock for every SM (no per-SM alignment needed); its step is measured, not
assumed (32 ns on an H100).

Triton's CPU interpreter (``TRITON_INTERPRET=1``) cannot call methods of Triton aggregates, so there the profiler is
a plain class over the same operations, stamped with the host's ``time.perf_counter_ns`` and SM 0: the
records' layout and the decoding are exercised, not the GPU's timing.
"""

# no `from __future__ import annotations`: Triton 3.6 checks aggregate fields with isinstance on the annotations
import os
import time
from collections.abc import Callable
from typing import Any

import triton
import triton.language as tl

from kbench.intra_layout import HEADER, TASK_BITS, TIME_BITS, WRITTEN

INTERPRETED = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")  # decided as Triton decides @jit

# globals a compiled kernel reads must be constexpr; the interpreter computes with them as plain ints
_const: Callable[[int], Any] = int if INTERPRETED else tl.constexpr
_TIME_MASK = _const((1 << TIME_BITS) - 1)
_TASK_MASK = _const((1 << TASK_BITS) - 1)
_WRITTEN = _const(WRITTEN)
_HEADER = _const(HEADER)

if INTERPRETED:

    def _now() -> Any:
        return tl.full((), time.perf_counter_ns(), tl.int64)

    def _smid() -> Any:
        return tl.full((), 0, tl.int32)

    def _device(fn: Callable[..., Any]) -> Any:
        return fn

else:

    @triton.jit
    def _now():  # type: ignore[no-untyped-def]
        return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64, is_pure=False, pack=1)

    @triton.jit
    def _smid():  # type: ignore[no-untyped-def]
        return tl.inline_asm_elementwise("mov.u32 $0, %smid;", "=r", [], dtype=tl.int32, is_pure=True, pack=1)

    _device = triton.jit


class Profiler:
    """A CTA's recorder: where its region starts, how many records it made, how many fit, its SM."""

    buf: tl.tensor
    base: tl.tensor  # the region's first word (the count), as an offset into buf
    count: tl.tensor  # records made so far (also those that did not fit)
    limit: tl.tensor  # records that fit in the region (-1: the buffer has no region for this CTA)
    smid: tl.tensor
    leader: tl.tensor
    enabled: tl.constexpr

    def __init__(self, buf: Any, base: Any, count: Any, limit: Any, smid: Any, leader: Any, enabled: Any) -> None:
        self.buf = buf
        self.base = base
        self.count = count
        self.limit = limit
        self.smid = smid
        self.leader = leader
        self.enabled = tl.constexpr(enabled)

    @staticmethod
    @_device
    def create(  # type: ignore[no-untyped-def]
        profiler_buffer,
        group_id: tl.constexpr = 0,
        num_groups: tl.constexpr = 1,
        is_leader=True,
        ENABLE_PROFILING: tl.constexpr = True,
    ):
        """A profiler for this CTA (``group_id``/``num_groups``: one group per CTA in Triton, as in
        triton-distributed's interface; only ``is_leader`` threads write)."""
        leader = tl.full((), 1, tl.int1) & is_leader
        if ENABLE_PROFILING:
            n0 = tl.num_programs(0)
            n1 = tl.num_programs(1)
            ctas = (n0 * n1 * tl.num_programs(2)).to(tl.int64)
            cta = (tl.program_id(0) + n0 * (tl.program_id(1) + n1 * tl.program_id(2))).to(tl.int64)
            per = tl.load(profiler_buffer + 1) // ctas
            tl.store(profiler_buffer + 2, ctas, mask=leader)
            base = _HEADER + cta * per
            limit = per - 1
            smid = _smid()
        else:
            base = tl.full((), 0, tl.int64)
            limit = tl.full((), -1, tl.int64)
            smid = tl.full((), 0, tl.int32)
        return Profiler(profiler_buffer, base, tl.full((), 0, tl.int64), limit, smid, leader, ENABLE_PROFILING)

    @_device
    def record(self, is_start: tl.constexpr, task_type: tl.constexpr):  # type: ignore[no-untyped-def]
        """Stamp the start (``is_start=True``) or end of task ``task_type`` (0..32767)."""
        if self.enabled:
            now = _now()
            word = ((now & _TIME_MASK) << 16) | ((task_type & _TASK_MASK) << 1) | (1 if is_start else 0)
            tl.store(self.buf + self.base + 1 + self.count, word, mask=self.leader & (self.count < self.limit))
            head = (self.count + 1) | (self.smid.to(tl.int64) << 32) | _WRITTEN
            tl.store(self.buf + self.base, head, mask=self.leader & (self.limit >= 0))
        return Profiler(self.buf, self.base, self.count + 1, self.limit, self.smid, self.leader, self.enabled)


if not INTERPRETED:
    # the constructor runs at compile time; Triton (3.6 and 3.9 checked) wants it marked so
    Profiler.__init__ = triton.constexpr_function(Profiler.__init__)  # type: ignore[method-assign]
    Profiler = tl.core._aggregate(Profiler)  # type: ignore[misc]
