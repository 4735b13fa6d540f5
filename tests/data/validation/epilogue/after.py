"""epilogue after: bias and gelu applied to the accumulator in the GEMM's registers and fp16 C stored once; DRAM
moves A, B, bias and C only."""

from __future__ import annotations

from typing import Any, ClassVar

from kbench.plan.base import Config, Launch

from ._common import GemmGelu


class After(GemmGelu):
    """the epilogue fused into the GEMM."""

    KERNELS: ClassVar[list[str]] = ["gemm_kernel"]

    def build(self, ws: Any, cfg: Config) -> Launch:
        gemm, grid = self.gemm(ws, cfg, ws["c"], fused=True)
        return Launch(gemm, grid)


PLAN = After
