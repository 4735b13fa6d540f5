"""tile_mm base: tl.dot (tensor cores), 128x128 tiles on 8 warps: the fixed twin of cudacore and spilling."""

from __future__ import annotations

from typing import ClassVar

from kbench.plan.base import Config

from ._common import TileMatmul


class Base(TileMatmul):
    """products through tl.dot."""

    TUNING: ClassVar[list[Config]] = [{"BM": 128, "BN": 128, "BK": 64, "num_warps": 8, "num_stages": 3}]
    DOT: ClassVar[bool] = True


PLAN = Base
