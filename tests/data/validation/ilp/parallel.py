"""ilp parallel: the fixed twin of serial, one block of 1024 elements per CTA on 8 warps (4 independent chains per
thread, many CTAs per SM)."""

from __future__ import annotations

from typing import ClassVar

from kbench.plan.base import Config

from ._common import Ilp


class Parallel(Ilp):
    """BLOCK=1024 on 8 warps, one block per CTA."""

    TUNING: ClassVar[list[Config]] = [{"BLOCK": 1024, "num_warps": 8}]


PLAN = Parallel
