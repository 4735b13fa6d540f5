"""y[r, :] = x[r, :] / sqrt(mean(x[r, :]^2) + eps), fp32; what both versions share. One program per row. CHUNK = 0:
the whole row in one block held on chip (read once); else two loops of CHUNK columns, the second reloading x."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import triton
import triton.language as tl

from kbench.plan.base import Config, KernelPlan, Launch, Stage, param

EPS = 1e-6


@triton.jit
def rms_two_pass_kernel(x_ptr, y_ptr, cols, eps, CHUNK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64) * cols
    acc = tl.zeros([CHUNK], dtype=tl.float32)
    for c in range(0, cols, CHUNK):
        offs = c + tl.arange(0, CHUNK)
        x = tl.load(x_ptr + row + offs, mask=offs < cols, other=0.0)
        acc += x * x
    inv = tl.math.rsqrt(tl.sum(acc, axis=0) / cols + eps)
    for c in range(0, cols, CHUNK):  # the row again, from DRAM: the first loop's reads have left L2
        offs = c + tl.arange(0, CHUNK)
        x = tl.load(x_ptr + row + offs, mask=offs < cols, other=0.0)
        tl.store(y_ptr + row + offs, x * inv, mask=offs < cols)


@triton.jit
def rms_on_chip_kernel(x_ptr, y_ptr, cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64) * cols
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row + offs, mask=offs < cols, other=0.0)
    inv = tl.math.rsqrt(tl.sum(x * x, axis=0) / cols + eps)
    tl.store(y_ptr + row + offs, x * inv, mask=offs < cols)


class RmsNorm(KernelPlan):
    """y[r, :] = x[r, :] / rms(x[r, :])."""

    rows: int = param(8192, help="rows of x (one program each)", ge=1)
    cols: int = param(16384, help="columns of x (the on-chip version holds a whole row)", ge=1, le=16384)
    dtype: Literal["float32"] = param("float32", help="element type")

    check_params: ClassVar[dict[str, Any]] = {"rows": 4, "cols": 4000}  # masks exercised, 2% of lanes
    tolerance: ClassVar[dict[str, float]] = {"float32": 1e-5}
    TUNING: ClassVar[list[Config]] = []
    CHUNK: ClassVar[int] = 0

    def stages(self) -> list[Stage]:
        n = float(self.rows * self.cols)
        return [
            Stage(
                "rmsnorm",
                flops=3 * n,  # a square and an addition per element for the sum, a multiplication to scale
                dram_bytes=8 * n,  # x read once, y written once
                precision="fp32",
                build=self.build,
                tuning=self.TUNING,
                kernels=["rms_two_pass_kernel" if self.CHUNK else "rms_on_chip_kernel"],
            ),
        ]

    def build(self, ws: Any, cfg: Config) -> Launch:
        grid = (self.rows,)
        args = (ws["x"], ws["y"], self.cols, EPS)
        if self.CHUNK:
            two = rms_two_pass_kernel[grid]
            return Launch(lambda: two(*args, CHUNK=self.CHUNK, **cfg), grid)
        one, block = rms_on_chip_kernel[grid], triton.next_power_of_2(self.cols)
        return Launch(lambda: one(*args, BLOCK=block, **cfg), grid)

    def setup(self, device: str, seed: int) -> Any:
        import torch

        g = torch.Generator(device=device).manual_seed(seed)
        x = torch.randn(self.rows, self.cols, device=device, generator=g)
        return {"x": x, "y": torch.empty_like(x)}

    def output(self, ws: Any) -> Any:
        return ws["y"]

    def reference(self, ws: Any) -> Any:
        x = ws["x"].double()
        return x * (x.square().mean(dim=1, keepdim=True) + EPS).rsqrt()
