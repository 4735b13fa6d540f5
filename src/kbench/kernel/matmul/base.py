"""matmul base: Triton, one fixed 128x128x64 tile, row-major program order."""

from typing import ClassVar

from kbench.kernel.matmul._triton import TritonMatmul
from kbench.plan.base import Config


class MatmulBase(TritonMatmul):
    """C = A @ B with one fixed tiling."""

    TUNING: ClassVar[list[Config]] = [
        {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 1, "num_warps": 8, "num_stages": 3}
    ]


PLAN = MatmulBase
