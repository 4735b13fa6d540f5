"""tile_mm nostage: base's tiles with num_stages=1: the A and B tiles of step k+1 are not loaded while step k's
tl.dot runs (no software pipelining, no cp.async), so every step waits on global-memory latency."""

from __future__ import annotations

from typing import ClassVar

from kbench.plan.base import Config

from ._common import TileMatmul


class NoStage(TileMatmul):
    """tl.dot, 128x128 tiles on 8 warps, one stage (fix: num_stages=3, base)."""

    TUNING: ClassVar[list[Config]] = [{"BM": 128, "BN": 128, "BK": 64, "num_warps": 8, "num_stages": 1}]
    DOT: ClassVar[bool] = True


PLAN = NoStage
