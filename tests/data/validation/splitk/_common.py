"""out[r] = sum of row r of x (ROWS x COLS fp32): partial_kernel sums SPLITS column slices of each row into
partials[r, s] (ROWS x SPLITS programs), combine_kernel adds each row's partials. What both versions share; they
differ in the combine's grid: COMBINE_PROGRAMS programs of ROWS_PER rows each."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import triton
import triton.language as tl

from kbench.plan.base import Config, KernelPlan, Launch, Stage, param


@triton.jit
def partial_kernel(x_ptr, part_ptr, cols, SPLITS: tl.constexpr, BLOCK: tl.constexpr):
    r = tl.program_id(0)
    s = tl.program_id(1)
    span = cols // SPLITS
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for c in range(s * span, (s + 1) * span, BLOCK):
        offs = c + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + r.to(tl.int64) * cols + offs)
    tl.store(part_ptr + r * SPLITS + s, tl.sum(acc, axis=0))


@triton.jit
def combine_kernel(part_ptr, out_ptr, rows, rows_per, SPLITS: tl.constexpr, ROWS_BLOCK: tl.constexpr):
    first = tl.program_id(0) * rows_per
    for r0 in range(first, first + rows_per, ROWS_BLOCK):
        r = r0 + tl.arange(0, ROWS_BLOCK)
        p = tl.load(part_ptr + r[:, None] * SPLITS + tl.arange(0, SPLITS)[None, :], mask=r[:, None] < rows, other=0.0)
        tl.store(out_ptr + r, tl.sum(p, axis=1), mask=r < rows)


class SplitRowSum(KernelPlan):
    """out[r] = sum of row r."""

    rows: int = param(4096, help="rows of x", ge=1)
    cols: int = param(8192, help="columns of x (a multiple of 4096: 8 slices of 512-column blocks)", ge=4096)
    dtype: Literal["float32"] = param("float32", help="element type")

    check_params: ClassVar[dict[str, Any]] = {"rows": 64, "cols": 8192}
    tolerance: ClassVar[dict[str, float]] = {"float32": 1e-4}
    SPLITS: ClassVar[int] = 8
    ROWS_PER: ClassVar[int] = 0  # rows per combine program; 0: every row in one program

    def stages(self) -> list[Stage]:
        r, c = float(self.rows), float(self.cols)
        return [
            Stage(
                "rowsum",
                flops=r * c,
                dram_bytes=4 * r * c + 4 * r,
                precision="fp32",
                build=self.build,
                tuning=[{"BLOCK": 512, "num_warps": 4}],
                kernels=["partial_kernel", "combine_kernel"],
            ),
        ]

    def build(self, ws: Any, cfg: Config) -> Launch:
        grid = (self.rows, self.SPLITS)
        part = partial_kernel[grid]
        per = self.ROWS_PER or self.rows
        comb = combine_kernel[(triton.cdiv(self.rows, per),)]

        def launch() -> None:
            part(ws["x"], ws["partials"], self.cols, SPLITS=self.SPLITS, **cfg)
            comb(ws["partials"], ws["out"], self.rows, per, SPLITS=self.SPLITS, ROWS_BLOCK=16, num_warps=1)

        return Launch(launch, grid)

    def setup(self, device: str, seed: int) -> Any:
        import torch

        g = torch.Generator(device=device).manual_seed(seed)
        x = torch.rand(self.rows, self.cols, device=device, generator=g)
        return {
            "x": x,
            "partials": torch.empty(self.rows, self.SPLITS, device=device),
            "out": torch.empty(self.rows, device=device),
        }

    def output(self, ws: Any) -> Any:
        return ws["out"]

    def reference(self, ws: Any) -> Any:
        return ws["x"].double().sum(dim=1)
