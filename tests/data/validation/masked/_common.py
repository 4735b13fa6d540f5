"""y[r, :] = g(x[r, :]) for each row r of a rows x cols fp32 matrix (cols = 1000), g(v) = STEPS dependent FMAs
(v * A + B), one program per row holding a BLOCK-lane tile of it, the lanes past cols masked on load and store; what
both versions share. The masked lanes do the arithmetic too (Triton computes every lane of a tile), so a BLOCK far
wider than the row multiplies the work: the versions differ only in BLOCK."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import triton
import triton.language as tl

from kbench.plan.base import Config, KernelPlan, Launch, Stage, param

STEPS = 128
A, B = 0.999, 0.001


@triton.jit
def row_map_kernel(x_ptr, y_ptr, cols, BLOCK: tl.constexpr, STEPS: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    mask = offs < cols
    v = tl.load(x_ptr + row * cols + offs, mask=mask, other=0.0)
    for _ in tl.static_range(STEPS):
        v = v * 0.999 + 0.001
    tl.store(y_ptr + row * cols + offs, v, mask=mask)


class RowMap(KernelPlan):
    """y = g(x) row by row, g(v) = STEPS FMAs v * A + B."""

    rows: int = param(32768, help="rows of x and y", ge=1)
    cols: int = param(1000, help="columns of x and y (at most the block)", ge=1, le=1024)
    dtype: Literal["float32"] = param("float32", help="element type of x and y")

    check_params: ClassVar[dict[str, Any]] = {"rows": 37, "cols": 1000}
    BLOCK: ClassVar[int] = 1024

    def stages(self) -> list[Stage]:
        n = float(self.rows * self.cols)
        return [
            Stage(
                "row_map",
                flops=2 * STEPS * n,
                dram_bytes=8 * n,
                precision="fp32",
                build=self.build,
                tuning=[{"BLOCK": self.BLOCK, "num_warps": 4}],
                kernels=["row_map_kernel"],
            ),
        ]

    def build(self, ws: Any, cfg: Config) -> Launch:
        grid = (self.rows,)
        k = row_map_kernel[grid]
        return Launch(lambda: k(ws["x"], ws["y"], self.cols, STEPS=STEPS, **cfg), grid)

    def setup(self, device: str, seed: int) -> Any:
        import torch

        g = torch.Generator(device=device).manual_seed(seed)
        x = torch.randn(self.rows, self.cols, device=device, generator=g)
        return {"x": x, "y": torch.empty_like(x)}

    def output(self, ws: Any) -> Any:
        return ws["y"]

    def reference(self, ws: Any) -> Any:
        y = ws["x"].double()
        for _ in range(STEPS):
            y = y * A + B
        return y
