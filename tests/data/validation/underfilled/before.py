"""underfilled before: one CTA walks each whole row (grid = rows)."""

from __future__ import annotations

from typing import Any, ClassVar

import triton
import triton.language as tl

from kbench.plan.base import Config, Launch

from ._common import RowSum


@triton.jit
def row_kernel(x_ptr, out_ptr, cols, BLOCK: tl.constexpr):
    r = tl.program_id(0).to(tl.int64)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for c0 in range(0, cols, BLOCK):
        offs = c0 + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + r * cols + offs, mask=offs < cols, other=0.0)
    tl.store(out_ptr + r, tl.sum(acc))


class Before(RowSum):
    """one CTA per row."""

    KERNEL: ClassVar[str] = "row_kernel"

    def build(self, ws: Any, cfg: Config) -> Launch:
        grid = (self.rows,)
        kernel = row_kernel[grid]
        return Launch(lambda: kernel(ws["x"], ws["out"], self.cols, **cfg), grid)


PLAN = Before
