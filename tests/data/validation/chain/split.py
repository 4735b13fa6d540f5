"""chain split: 64-row blocks on 8 warps (two warpgroups). P.V's 64 x 128 accumulator is split between them, each
needs the whole 64 x 64 probability tile as its register operand, so each computes the whole score tile: the scores'
FLOPs twice. Fix: 4 warps, one warpgroup per block (whole)."""

from __future__ import annotations

from typing import ClassVar

from kbench.plan.base import Config

from ._common import Chain


class Split(Chain):
    """BLOCK_M=64, BLOCK_N=64 on 8 warps, 2 stages."""

    TILE: ClassVar[Config] = {"BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 8, "num_stages": 2}


PLAN = Split
