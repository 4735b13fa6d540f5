"""chain whole: split's tiles on 4 warps: one warpgroup holds a block's whole 64 x 128 accumulator (64 fp32 registers
per thread) and computes the scores once."""

from __future__ import annotations

from typing import ClassVar

from kbench.plan.base import Config

from ._common import Chain


class Whole(Chain):
    """BLOCK_M=64, BLOCK_N=64 on 4 warps, 2 stages."""

    TILE: ClassVar[Config] = {"BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 4, "num_stages": 2}


PLAN = Whole
