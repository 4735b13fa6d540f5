"""out[r] = sum(x[r, :(r + 1) * BLOCK]), fp32; what both versions share. PAIRED: program p sums rows p and
rows - 1 - p (rows even), else program r sums row r."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import triton
import triton.language as tl

from kbench.plan.base import Config, KernelPlan, Launch, Stage, param

BLOCK = 128


@triton.jit
def prefix_rows_kernel(x_ptr, out_ptr, rows, cols, PAIRED: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    for half in tl.static_range(2 if PAIRED else 1):
        r = pid if half == 0 else rows - 1 - pid
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for j in range(0, r + 1):  # row r's work grows with r: the triangle
            acc += tl.load(x_ptr + r.to(tl.int64) * cols + j * BLOCK + tl.arange(0, BLOCK))
        tl.store(out_ptr + r, tl.sum(acc, axis=0))


class PrefixRows(KernelPlan):
    """out[r] = the sum of row r's first (r + 1) x 128 elements."""

    rows: int = param(64, help="rows of x (even)", ge=2)
    dtype: Literal["float32"] = param("float32", help="element type")

    check_params: ClassVar[dict[str, Any]] = {"rows": 16}
    tolerance: ClassVar[dict[str, float]] = {"float32": 1e-3}
    TUNING: ClassVar[list[Config]] = [{"num_warps": 4}]
    PAIRED: ClassVar[bool] = False

    def stages(self) -> list[Stage]:
        summed = float(BLOCK * self.rows * (self.rows + 1) // 2)
        return [
            Stage(
                "prefix",
                flops=summed,
                dram_bytes=4.0 * summed + 4.0 * self.rows,
                precision="fp32",
                build=self.build,
                tuning=self.TUNING,
                kernels=["prefix_rows_kernel"],
            ),
        ]

    def build(self, ws: Any, cfg: Config) -> Launch:
        grid = (self.rows // 2 if self.PAIRED else self.rows,)
        k = prefix_rows_kernel[grid]
        cols = BLOCK * self.rows
        return Launch(lambda: k(ws["x"], ws["out"], self.rows, cols, PAIRED=self.PAIRED, BLOCK=BLOCK, **cfg), grid)

    def setup(self, device: str, seed: int) -> Any:
        import torch

        g = torch.Generator(device=device).manual_seed(seed)
        x = torch.rand(self.rows, BLOCK * self.rows, device=device, generator=g)
        return {"x": x, "out": torch.empty(self.rows, device=device)}

    def output(self, ws: Any) -> Any:
        return ws["out"]

    def reference(self, ws: Any) -> Any:
        import torch

        x = ws["x"].double()
        return torch.stack([x[r, : (r + 1) * BLOCK].sum() for r in range(self.rows)])
