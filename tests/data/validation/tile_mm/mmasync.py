"""tile_mm mmasync: tl.dot on 2 warps (64x64 tiles): Hopper's warpgroup wgmma needs 4 warps, so Triton emits the
older warp-level mma.sync, a fraction of the H100's tensor throughput. Fix: 4 or 8 warps (base)."""

from __future__ import annotations

from typing import ClassVar

from kbench.plan.base import Config

from ._common import TileMatmul


class MmaSync(TileMatmul):
    """tl.dot, 64x64 tiles on 2 warps (mma.sync)."""

    TUNING: ClassVar[list[Config]] = [{"BM": 64, "BN": 64, "BK": 64, "num_warps": 2, "num_stages": 3}]
    DOT: ClassVar[bool] = True


PLAN = MmaSync
