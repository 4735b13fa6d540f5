"""tile_mm narrow: 128x32 tiles on 4 warps: each wgmma is m64n32k16, a narrow tensor tile (a quarter of base's
n128: four times the instructions, each reading its A operand from shared memory, for the same products), and
every CTA loads its strip of A for only 32 columns of C. Fix: 128x128 tiles on 8 warps (base, wgmma m64n128k16)."""

from __future__ import annotations

from typing import ClassVar

from kbench.plan.base import Config

from ._common import TileMatmul


class Narrow(TileMatmul):
    """tl.dot, 128x32 tiles on 4 warps."""

    TUNING: ClassVar[list[Config]] = [{"BM": 128, "BN": 32, "BK": 64, "num_warps": 4, "num_stages": 3}]
    DOT: ClassVar[bool] = True


PLAN = Narrow
