"""tile_mm tf32: base's tiles, but the fp16 tiles are converted to fp32 before tl.dot (input_precision="tf32"): the
tensor cores run tf32 at half the fp16 rate, on operands twice as large in shared memory. Fix: tl.dot on the fp16
tiles (base)."""

from __future__ import annotations

from typing import ClassVar

from kbench.plan.base import Config

from ._common import TileMatmul


class Tf32(TileMatmul):
    """tl.dot of the fp16 tiles upcast to fp32 (tf32 tensor cores)."""

    TUNING: ClassVar[list[Config]] = [{"BM": 128, "BN": 128, "BK": 64, "num_warps": 8, "num_stages": 3}]
    DOT: ClassVar[bool] = True
    UPCAST: ClassVar[bool] = True


PLAN = Tf32
