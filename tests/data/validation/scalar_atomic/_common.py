"""out[0] = sum of x: each program sums its BLOCK-element tile on chip and adds the scalar with ONE tl.atomic_add
(one per program, whatever its threads); what both versions share. They differ in BLOCK, hence in how many programs
meet at the one address."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import triton
import triton.language as tl

from kbench.plan.base import Config, KernelPlan, Launch, Stage, param


@triton.jit
def tile_sum_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.atomic_add(out_ptr, tl.sum(x, axis=0))


class ScalarAtomic(KernelPlan):
    """out[0] = sum(x)."""

    n: int = param(1 << 24, help="elements of x", ge=1)
    dtype: Literal["float32"] = param("float32", help="element type")

    check_params: ClassVar[dict[str, Any]] = {"n": 5000}
    tolerance: ClassVar[dict[str, float]] = {"float32": 1e-3}
    TUNING: ClassVar[list[Config]] = [{"BLOCK": 4096, "num_warps": 8}]

    def stages(self) -> list[Stage]:
        n = float(self.n)
        return [
            Stage(
                "sum",
                flops=n,
                dram_bytes=4 * n + 4,
                precision="fp32",
                build=self.build,
                tuning=self.TUNING,
                kernels=["tile_sum_kernel"],
            ),
        ]

    def build(self, ws: Any, cfg: Config) -> Launch:
        grid = (triton.cdiv(self.n, cfg["BLOCK"]),)
        k = tile_sum_kernel[grid]

        def launch() -> None:
            ws["out"].zero_()
            k(ws["x"], ws["out"], self.n, **cfg)

        return Launch(launch, grid)

    def setup(self, device: str, seed: int) -> Any:
        import torch

        g = torch.Generator(device=device).manual_seed(seed)
        x = torch.rand(self.n, device=device, generator=g)
        return {"x": x, "out": torch.zeros(1, device=device)}

    def output(self, ws: Any) -> Any:
        return ws["out"]

    def reference(self, ws: Any) -> Any:
        return ws["x"].double().sum().reshape(1)
