"""transpose naive: each program copies BLOCK elements of one column of x into a row of y: its loads step by a
whole row of x (one useful float per 32-byte sector), its stores are contiguous."""

from __future__ import annotations

from typing import Any, ClassVar

import triton
import triton.language as tl

from kbench.plan.base import Config, Launch

from ._common import Transpose


@triton.jit
def column_copy_kernel(x_ptr, y_ptr, rows, cols, BLOCK: tl.constexpr):
    c = tl.program_id(0).to(tl.int64)
    r = tl.program_id(1).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x_ptr + r * cols + c, mask=r < rows)
    tl.store(y_ptr + c * rows + r, v, mask=r < rows)


class Naive(Transpose):
    """a column per program."""

    KERNEL: ClassVar[str] = "column_copy_kernel"
    TUNING: ClassVar[list[Config]] = [{"BLOCK": 1024, "num_warps": 4}]

    def build(self, ws: Any, cfg: Config) -> Launch:
        grid = (self.cols, triton.cdiv(self.rows, cfg["BLOCK"]))
        k = column_copy_kernel[grid]
        return Launch(lambda: k(ws["x"], ws["y"], self.rows, self.cols, **cfg), grid)


PLAN = Naive
