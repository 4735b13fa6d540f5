"""matmul v2: Triton, grouped (L2-friendly) program order, tiling autotuned per device and shape."""

from typing import ClassVar

from kbench.kernel.matmul._triton import TritonMatmul
from kbench.plan.base import Config


class MatmulGrouped(TritonMatmul):
    """C = A @ B, GROUP_M=8 program order, autotuned tiles."""

    TUNING: ClassVar[list[Config]] = [
        {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "GROUP_M": 8, "num_warps": 8, "num_stages": 3},
        {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8, "num_warps": 8, "num_stages": 4},
        {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8, "num_warps": 4, "num_stages": 4},
        {"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8, "num_warps": 4, "num_stages": 4},
    ]


PLAN = MatmulGrouped
