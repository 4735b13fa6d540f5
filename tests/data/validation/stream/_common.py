"""y = 2 x + 1 over an fp32 vector by a grid-stride kernel; what both versions share. CTA p handles the blocks
p, p + grid, p + 2 grid, ... (ITERS_PER_CTA of them); the versions differ in the grid, the block and the warps."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import triton
import triton.language as tl

from kbench.plan.base import Config, KernelPlan, Launch, Stage, param


@triton.jit
def stream_kernel(x_ptr, y_ptr, n, iters, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    for i in range(iters):
        offs = (i * nprog + pid).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask)
        tl.store(y_ptr + offs, 2.0 * x + 1.0, mask=mask)


class Stream(KernelPlan):
    """y = 2 x + 1."""

    n: int = param(1 << 27, help="elements of x and y", ge=1)
    dtype: Literal["float32"] = param("float32", help="element type")

    check_params: ClassVar[dict[str, Any]] = {"n": 33333}
    tolerance: ClassVar[dict[str, float]] = {"float32": 1e-6}
    TUNING: ClassVar[list[Config]] = []
    # the number of CTAs, 0 for one block per CTA (cdiv(n, BLOCK))
    GRID: ClassVar[int] = 0

    def stages(self) -> list[Stage]:
        n = float(self.n)
        return [
            Stage(
                "axpb",
                flops=2 * n,
                dram_bytes=8 * n,
                precision="fp32",
                build=self.build,
                tuning=self.TUNING,
                kernels=["stream_kernel"],
            ),
        ]

    def build(self, ws: Any, cfg: Config) -> Launch:
        blocks = triton.cdiv(self.n, cfg["BLOCK"])
        grid = (min(self.GRID, blocks) if self.GRID else blocks,)
        iters = triton.cdiv(blocks, grid[0])
        k = stream_kernel[grid]
        return Launch(lambda: k(ws["x"], ws["y"], self.n, iters, **cfg), grid)

    def setup(self, device: str, seed: int) -> Any:
        import torch

        g = torch.Generator(device=device).manual_seed(seed)
        x = torch.randn(self.n, device=device, generator=g)
        return {"x": x, "y": torch.empty_like(x)}

    def output(self, ws: Any) -> Any:
        return ws["y"]

    def reference(self, ws: Any) -> Any:
        return 2.0 * ws["x"].double() + 1.0
