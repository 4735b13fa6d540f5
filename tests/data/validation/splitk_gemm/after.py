"""splitk_gemm after: no split: each of the 1056 tiles runs its whole K loop and stores fp16 C; DRAM moves A, B and C
only."""

from __future__ import annotations

from typing import Any, ClassVar

from kbench.plan.base import Config, Launch

from ._common import SplitMatmul


class After(SplitMatmul):
    """one program per tile, the whole of K."""

    KERNELS: ClassVar[list[str]] = ["mm_kernel"]

    def build(self, ws: Any, cfg: Config) -> Launch:
        mm, grid = self.mm(ws, cfg, ws["c"])
        return Launch(mm, grid)


PLAN = After
