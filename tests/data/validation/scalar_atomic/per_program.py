"""scalar_atomic per_program: 32-element tiles on one warp: 524,288 programs at n = 2^24, each ONE scalar atomic add
to out[0]: the atomics on that one word are serialized in L2 (about 1.8 ns each on an H100: ~0.94 ms), far longer
than reading 64 MiB. Fix: reduce 4096 elements on chip per atomic (wide)."""

from __future__ import annotations

from typing import ClassVar

from kbench.plan.base import Config

from ._common import ScalarAtomic


class PerProgram(ScalarAtomic):
    """32 elements per atomic."""

    TUNING: ClassVar[list[Config]] = [{"BLOCK": 32, "num_warps": 1}]


PLAN = PerProgram
