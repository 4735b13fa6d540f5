"""tile_mm spilling: a 256x256 fp32 accumulator on 4 warps holds 512 values per thread, more than the 255
registers a thread can have: the compiler spills to local memory."""

from __future__ import annotations

from typing import ClassVar

from kbench.plan.base import Config

from ._common import TileMatmul


class Spilling(TileMatmul):
    """256x256 tiles on 4 warps."""

    TUNING: ClassVar[list[Config]] = [{"BM": 256, "BN": 256, "BK": 32, "num_warps": 4, "num_stages": 2}]
    DOT: ClassVar[bool] = True


PLAN = Spilling
