"""tile_mm cudacore: each 64x64 tile's products summed on the CUDA cores (broadcast multiply, tl.sum)."""

from __future__ import annotations

from typing import ClassVar

from kbench.plan.base import Config

from ._common import TileMatmul


class CudaCore(TileMatmul):
    """products summed with tl.sum on the CUDA cores."""

    TUNING: ClassVar[list[Config]] = [{"BM": 64, "BN": 64, "BK": 8, "num_warps": 8}]
    DOT: ClassVar[bool] = False


PLAN = CudaCore
