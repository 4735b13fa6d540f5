"""y = 2 x + 1 over an fp32 matrix; what both versions share."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import triton
import triton.language as tl

from kbench.plan.base import Config, KernelPlan, Launch, Stage, param


@triton.jit
def axpb_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(y_ptr + offs, 2.0 * x + 1.0, mask=offs < n)


class Axpb(KernelPlan):
    """y = 2 x + 1."""

    rows: int = param(256, help="rows of x", ge=1)
    cols: int = param(8192, help="columns of x", ge=1)
    dtype: Literal["float32"] = param("float32", help="element type")

    check_params: ClassVar[dict[str, Any]] = {"rows": 3, "cols": 2000}
    tolerance: ClassVar[dict[str, float]] = {"float32": 1e-6}
    PER_ROW: ClassVar[bool] = False

    def stages(self) -> list[Stage]:
        n = float(self.rows * self.cols)
        return [
            Stage(
                "axpb",
                flops=2 * n,
                dram_bytes=8 * n,
                precision="fp32",
                build=self.build,
                tuning=[{"BLOCK": 1024, "num_warps": 4}],
                kernels=["axpb_kernel"],
            ),
        ]

    def build(self, ws: Any, cfg: Config) -> Launch:
        x, y = ws["x"], ws["y"]
        if not self.PER_ROW:
            grid = (triton.cdiv(self.rows * self.cols, cfg["BLOCK"]),)
            k = axpb_kernel[grid]
            return Launch(lambda: k(x, y, self.rows * self.cols, **cfg), grid)
        row_grid = (triton.cdiv(self.cols, cfg["BLOCK"]),)
        k = axpb_kernel[row_grid]

        def per_row() -> object:
            out = None
            for r in range(self.rows):
                out = k(x[r], y[r], self.cols, **cfg)
            return out

        return Launch(per_row, row_grid)

    def setup(self, device: str, seed: int) -> Any:
        import torch

        g = torch.Generator(device=device).manual_seed(seed)
        x = torch.randn(self.rows, self.cols, device=device, generator=g)
        return {"x": x, "y": torch.empty_like(x)}

    def output(self, ws: Any) -> Any:
        return ws["y"]

    def reference(self, ws: Any) -> Any:
        return 2.0 * ws["x"].double() + 1.0
