"""y[i] = p(x[i]), p a STEPS-step FMA recurrence (v = v * 0.999 + x), fp32; what both versions share. A grid-stride
kernel: CTA c handles the blocks c, c + grid, ...; the versions differ in the grid, BLOCK and num_warps only."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import triton
import triton.language as tl

from kbench.plan.base import Config, KernelPlan, Launch, Stage, param

STEPS = 256


@triton.jit
def ilp_kernel(x_ptr, y_ptr, n, iters, STEPS: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    for i in range(iters):
        offs = (i * nprog + pid).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask, other=0.0)
        v = x
        for _ in range(STEPS):
            v = v * 0.999 + x
        tl.store(y_ptr + offs, v, mask=mask)


class Ilp(KernelPlan):
    """y = p(x), p a STEPS-step FMA recurrence."""

    n: int = param(1 << 22, help="elements of x and y", ge=1)
    dtype: Literal["float32"] = param("float32", help="element type")

    check_params: ClassVar[dict[str, Any]] = {"n": 5000}
    tolerance: ClassVar[dict[str, float]] = {"float32": 1e-4}
    TUNING: ClassVar[list[Config]] = []
    GRID: ClassVar[int] = 0  # CTAs; 0: one block per CTA

    def stages(self) -> list[Stage]:
        n = float(self.n)
        return [
            Stage(
                "poly",
                flops=2.0 * STEPS * n,
                dram_bytes=8.0 * n,
                precision="fp32",
                build=self.build,
                tuning=self.TUNING,
                kernels=["ilp_kernel"],
            ),
        ]

    def build(self, ws: Any, cfg: Config) -> Launch:
        blocks = triton.cdiv(self.n, cfg["BLOCK"])
        grid = (min(self.GRID, blocks) if self.GRID else blocks,)
        iters = triton.cdiv(blocks, grid[0])
        k = ilp_kernel[grid]
        return Launch(lambda: k(ws["x"], ws["y"], self.n, iters, STEPS=STEPS, **cfg), grid)

    def setup(self, device: str, seed: int) -> Any:
        import torch

        g = torch.Generator(device=device).manual_seed(seed)
        x = torch.rand(self.n, device=device, generator=g)
        return {"x": x, "y": torch.empty_like(x)}

    def output(self, ws: Any) -> Any:
        return ws["y"]

    def reference(self, ws: Any) -> Any:
        x = ws["x"].double()
        v = x
        for _ in range(STEPS):
            v = v * 0.999 + x
        return v
