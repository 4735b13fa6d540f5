"""underfilled after: each row split over SPLIT CTAs whose partial sums are added atomically."""

from __future__ import annotations

from typing import Any, ClassVar

import triton
import triton.language as tl

from kbench.plan.base import Config, Launch

from ._common import RowSum

SPLIT = 64


@triton.jit
def split_kernel(x_ptr, out_ptr, cols, per_split, BLOCK: tl.constexpr):
    r = tl.program_id(0).to(tl.int64)
    s = tl.program_id(1)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    start = s * per_split
    for c0 in range(0, per_split, BLOCK):
        offs = start + c0 + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + r * cols + offs, mask=(offs < cols) & (c0 + tl.arange(0, BLOCK) < per_split), other=0.0)
    tl.atomic_add(out_ptr + r, tl.sum(acc))


class After(RowSum):
    """rows x 64 CTAs, partial sums added atomically."""

    KERNEL: ClassVar[str] = "split_kernel"

    def build(self, ws: Any, cfg: Config) -> Launch:
        grid = (self.rows, SPLIT)
        per_split = triton.cdiv(self.cols, SPLIT)
        kernel = split_kernel[grid]

        def launch() -> None:
            ws["out"].zero_()
            kernel(ws["x"], ws["out"], self.cols, per_split, **cfg)

        return Launch(launch, grid)


PLAN = After
