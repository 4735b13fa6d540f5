"""ilp serial: 132 CTAs of 4 warps (one per SM, one warp per scheduler), one element per thread at a time: every FMA
waits on the one before and nothing else is ready to issue. Fix: many CTAs of 8 warps, 4 elements per thread
(parallel)."""

from __future__ import annotations

from typing import ClassVar

from kbench.plan.base import Config

from ._common import Ilp


class Serial(Ilp):
    """BLOCK=128 on 4 warps, 132 CTAs."""

    TUNING: ClassVar[list[Config]] = [{"BLOCK": 128, "num_warps": 4}]
    GRID: ClassVar[int] = 132


PLAN = Serial
