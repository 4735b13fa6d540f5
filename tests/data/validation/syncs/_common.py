"""out[r] = sum of x[r, :], fp32, one CTA per row looping over the row BLOCK columns at a time; what both versions
share. The kernel differs only in PER_ITER: whether each iteration's tile is reduced to a scalar (tl.sum in the loop)
or added to a BLOCK-wide accumulator reduced once after the loop."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import triton
import triton.language as tl

from kbench.plan.base import Config, KernelPlan, Launch, Stage, param


@triton.jit
def row_sync_kernel(x_ptr, out_ptr, cols, BLOCK: tl.constexpr, PER_ITER: tl.constexpr):
    r = tl.program_id(0).to(tl.int64)
    if PER_ITER:
        acc = tl.zeros((), dtype=tl.float32)
        for c0 in range(0, cols, BLOCK):
            offs = c0 + tl.arange(0, BLOCK)
            acc += tl.sum(tl.load(x_ptr + r * cols + offs, mask=offs < cols, other=0.0), axis=0)
        tl.store(out_ptr + r, acc)
    else:
        vec = tl.zeros((BLOCK,), dtype=tl.float32)
        for c0 in range(0, cols, BLOCK):
            offs = c0 + tl.arange(0, BLOCK)
            vec += tl.load(x_ptr + r * cols + offs, mask=offs < cols, other=0.0)
        tl.store(out_ptr + r, tl.sum(vec, axis=0))


class RowSync(KernelPlan):
    """out[r] = sum(x[r, :])."""

    rows: int = param(8192, help="rows of x (one CTA each)", ge=1)
    cols: int = param(8192, help="columns of x", ge=1)
    dtype: Literal["float32"] = param("float32", help="element type")

    check_params: ClassVar[dict[str, Any]] = {"rows": 5, "cols": 5000}
    tolerance: ClassVar[dict[str, float]] = {"float32": 1e-5}
    TUNING: ClassVar[list[Config]] = [{"BLOCK": 512, "num_warps": 4}]
    PER_ITER: ClassVar[bool] = False

    def stages(self) -> list[Stage]:
        n = float(self.rows * self.cols)
        return [
            Stage(
                "rowsum",
                flops=n,
                dram_bytes=4 * (n + self.rows),
                precision="fp32",
                build=self.build,
                tuning=self.TUNING,
                kernels=["row_sync_kernel"],
            ),
        ]

    def build(self, ws: Any, cfg: Config) -> Launch:
        grid = (self.rows,)
        k = row_sync_kernel[grid]
        return Launch(lambda: k(ws["x"], ws["out"], self.cols, PER_ITER=self.PER_ITER, **cfg), grid)

    def setup(self, device: str, seed: int) -> Any:
        import torch

        g = torch.Generator(device=device).manual_seed(seed)
        x = torch.randn(self.rows, self.cols, device=device, generator=g)
        return {"x": x, "out": torch.empty(self.rows, device=device)}

    def output(self, ws: Any) -> Any:
        return ws["out"]

    def reference(self, ws: Any) -> Any:
        return ws["x"].double().sum(dim=1)
