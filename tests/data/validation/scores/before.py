"""scores before: two kernels in one stage, exchanging the score matrix through DRAM. scores_kernel writes
S = Q K^T (scaled, fp16: BH x N x N, 2 x 66 x 2048^2 = 554 MB at the defaults) to the workspace's `scores`;
softmax_pv_kernel reads it back in 128 x 64 tiles for the online softmax and P V. Both kernels are tiled for wgmma
(128-row blocks on 8 warps, 3 stages); the distance is the round trip, 16x the compulsory bytes. Fix: fuse (after)."""

from __future__ import annotations

from typing import Any, ClassVar

import triton

from kbench.plan.base import Config, Launch

from ._common import Attention, scores_kernel, softmax_pv_kernel


class Before(Attention):
    """scores to DRAM, then softmax and P V from them."""

    KERNELS: ClassVar[list[str]] = ["scores_kernel", "softmax_pv_kernel"]

    def scratch(self, device: str) -> dict[str, Any]:
        import torch

        return {"scores": torch.empty(self.bh, self.n, self.n, device=device, dtype=torch.float16)}

    def build(self, ws: Any, cfg: Config) -> Launch:
        grid = (triton.cdiv(self.n, cfg["BLOCK_M"]), self.bh)
        scores, pv = scores_kernel[grid], softmax_pv_kernel[grid]
        d = self.d

        def launch() -> None:
            scores(ws["q"], ws["k"], ws["scores"], self.n, self.qk_scale, D=d, **cfg)
            pv(ws["scores"], ws["v"], ws["o"], self.n, D=d, **cfg)

        return Launch(launch, grid)


PLAN = Before
