"""softmax fused: one kernel per row holds the row on chip: x is read once, y written once."""

from __future__ import annotations

from typing import Any

import triton
import triton.language as tl

from kbench.plan.base import Config, Launch, Stage

from ._common import Softmax


@triton.jit
def softmax_kernel(x_ptr, y_ptr, cols, BLOCK: tl.constexpr):
    r = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + r * cols + offs, mask=offs < cols, other=-float("inf"))
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + r * cols + offs, e / tl.sum(e, axis=0), mask=offs < cols)


class Fused(Softmax):
    """one kernel."""

    def stages(self) -> list[Stage]:
        n = float(self.rows * self.cols)
        return [
            Stage(
                "softmax",
                flops=7 * n,
                dram_bytes=8 * n,
                precision="fp32",
                build=self.build,
                tuning=[{"num_warps": 8}],
                kernels=["softmax_kernel"],
            ),
        ]

    def build(self, ws: Any, cfg: Config) -> Launch:
        k, block = softmax_kernel[(self.rows,)], triton.next_power_of_2(self.cols)
        return Launch(lambda: k(ws["x"], ws["y"], self.cols, BLOCK=block, **cfg), (self.rows,))


PLAN = Fused
