"""y[r] = sum(x[r, :cols // 2]) for each row r of a rows x cols fp32 matrix, one program per row; what both versions
share. The versions differ only in WHOLE: whether the row is loaded whole and its second half zeroed after the load
(tl.where), or only its first half is loaded."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import triton
import triton.language as tl

from kbench.plan.base import Config, KernelPlan, Launch, Stage, param


@triton.jit
def half_sum_kernel(x_ptr, y_ptr, cols, BLOCK: tl.constexpr, WHOLE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    half = cols // 2
    if WHOLE:
        v = tl.load(x_ptr + row * cols + offs, mask=offs < cols, other=0.0)
        v = tl.where(offs < half, v, 0.0)
    else:
        v = tl.load(x_ptr + row * cols + offs, mask=offs < half, other=0.0)
    tl.store(y_ptr + row, tl.sum(v, axis=0))


class HalfSum(KernelPlan):
    """y[r] = the sum of the first half of row r of x."""

    rows: int = param(65536, help="rows of x", ge=1)
    cols: int = param(2048, help="columns of x (even; at most 4096)", ge=2, le=4096)
    dtype: Literal["float32"] = param("float32", help="element type of x and y")

    check_params: ClassVar[dict[str, Any]] = {"rows": 37, "cols": 130}
    WHOLE: ClassVar[bool] = False

    def stages(self) -> list[Stage]:
        half = self.cols // 2
        return [
            Stage(
                "half_sum",
                flops=float(self.rows * half),
                dram_bytes=4.0 * self.rows * (half + 1),  # the first half of each row read, one float written
                precision="fp32",
                build=self.build,
                tuning=[{"num_warps": 4}],
                kernels=["half_sum_kernel"],
            ),
        ]

    def build(self, ws: Any, cfg: Config) -> Launch:
        grid = (self.rows,)
        block = triton.next_power_of_2(self.cols if self.WHOLE else self.cols // 2)
        k = half_sum_kernel[grid]
        return Launch(lambda: k(ws["x"], ws["y"], self.cols, BLOCK=block, WHOLE=self.WHOLE, **cfg), grid)

    def setup(self, device: str, seed: int) -> Any:
        import torch

        g = torch.Generator(device=device).manual_seed(seed)
        return {"x": torch.randn(self.rows, self.cols, device=device, generator=g),
                "y": torch.empty(self.rows, device=device)}  # fmt: skip

    def output(self, ws: Any) -> Any:
        return ws["y"]

    def reference(self, ws: Any) -> Any:
        return ws["x"][:, : self.cols // 2].double().sum(dim=1)
