"""splitk_gemm before: split-K = 4 although the 1056 output tiles already fill the GPU 4 times (2 CTAs per SM): each
of 4224 programs runs a quarter of K and stores its fp32 partial tile to the workspace's `partials` (4 x 4224 x
4096 x 4 bytes = 277 MB at the defaults), then sum_kernel reads them back and writes C. mm_kernel is tiled for wgmma
(128 x 128 x 64, 8 warps, 3 stages); the distance is the partials' round trip and the second kernel. Fix: no split
(after)."""

from __future__ import annotations

from typing import Any, ClassVar

from kbench.plan.base import Config, Launch

from ._common import SplitMatmul, sum_kernel


class Before(SplitMatmul):
    """split-K = 4 and a summing kernel."""

    SPLITS: ClassVar[int] = 4
    KERNELS: ClassVar[list[str]] = ["mm_kernel", "sum_kernel"]

    def scratch(self, device: str) -> dict[str, Any]:
        import torch

        return {"partials": torch.empty(self.SPLITS, self.m, self.n, device=device, dtype=torch.float32)}

    def build(self, ws: Any, cfg: Config) -> Launch:
        mm, grid = self.mm(ws, cfg, ws["partials"])
        block = self.SUM_BLOCK
        add = sum_kernel[(self.m, self.n // block)]

        def launch() -> None:
            mm()
            add(ws["partials"], ws["c"], self.m, self.n, SPLITS=self.SPLITS, BLOCK=block, num_warps=8)

        return Launch(launch, grid)


PLAN = Before
