"""scores after: one flash-attention kernel: each 128 x 64 score tile is computed by tl.dot, consumed by the online
softmax and P V in registers, and never written; DRAM moves Q, K, V and O only."""

from __future__ import annotations

from typing import Any, ClassVar

import triton

from kbench.plan.base import Config, Launch

from ._common import Attention, flash_kernel


class After(Attention):
    """fused: S stays on chip."""

    KERNELS: ClassVar[list[str]] = ["flash_kernel"]

    def build(self, ws: Any, cfg: Config) -> Launch:
        grid = (triton.cdiv(self.n, cfg["BLOCK_M"]), self.bh)
        kernel = flash_kernel[grid]
        args = (ws["q"], ws["k"], ws["v"], ws["o"], self.n, self.qk_scale)
        return Launch(lambda: kernel(*args, D=self.d, **cfg), grid)


PLAN = After
