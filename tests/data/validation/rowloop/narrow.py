"""rowloop narrow: one warp per row loops 32 columns at a time: one 4-byte load per thread per iteration (128 bytes
per warp in flight), so the loads are narrow and latency-bound. Fix: 4 warps, 2048 columns per iteration (wide)."""

from __future__ import annotations

from typing import ClassVar

from kbench.plan.base import Config

from ._common import RowLoop


class Narrow(RowLoop):
    """BLOCK=32 on 1 warp."""

    TUNING: ClassVar[list[Config]] = [{"BLOCK": 32, "num_warps": 1}]


PLAN = Narrow
