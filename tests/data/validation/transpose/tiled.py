"""transpose tiled: each program loads a BLOCK x BLOCK tile of x row by row and stores its transpose row by row
(Triton moves it through shared memory): loads and stores both coalesced."""

from __future__ import annotations

from typing import Any, ClassVar

import triton
import triton.language as tl

from kbench.plan.base import Config, Launch

from ._common import Transpose


@triton.jit
def tile_transpose_kernel(x_ptr, y_ptr, rows, cols, BLOCK: tl.constexpr):
    r = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    c = tl.program_id(1).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = (r[:, None] < rows) & (c[None, :] < cols)
    v = tl.load(x_ptr + r[:, None] * cols + c[None, :], mask=mask)
    tl.store(y_ptr + c[:, None] * rows + r[None, :], tl.trans(v), mask=tl.trans(mask))


class Tiled(Transpose):
    """tiles through shared memory."""

    KERNEL: ClassVar[str] = "tile_transpose_kernel"
    TUNING: ClassVar[list[Config]] = [{"BLOCK": 64, "num_warps": 4}]

    def build(self, ws: Any, cfg: Config) -> Launch:
        grid = (triton.cdiv(self.rows, cfg["BLOCK"]), triton.cdiv(self.cols, cfg["BLOCK"]))
        k = tile_transpose_kernel[grid]
        return Launch(lambda: k(ws["x"], ws["y"], self.rows, self.cols, **cfg), grid)


PLAN = Tiled
