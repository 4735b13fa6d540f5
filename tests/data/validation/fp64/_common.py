"""y = f(f(...f(x))), STEPS times f(v) = exp(v / 10) / 2, on an fp32 vector, one BLOCK-element tile per CTA, x and y
fp32; what both versions share. The kernel differs only in F64: whether x is converted to float64 for the arithmetic
(y converted back to float32 when stored)."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import triton
import triton.language as tl

from kbench.plan.base import Config, KernelPlan, Launch, Stage, param

STEPS = 16


@triton.jit
def expo_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr, F64: tl.constexpr, STEPS: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    if F64:
        x = x.to(tl.float64)
    y = x
    for _ in tl.static_range(STEPS):
        y = tl.exp(y * 0.1) * 0.5
    tl.store(y_ptr + offs, y.to(tl.float32), mask=mask)


class Expo(KernelPlan):
    """y = f applied STEPS times to x, f(v) = exp(v / 10) / 2."""

    n: int = param(1 << 26, help="elements of x and y", ge=1)
    dtype: Literal["float32"] = param("float32", help="element type of x and y")

    check_params: ClassVar[dict[str, Any]] = {"n": 33333}
    TUNING: ClassVar[list[Config]] = [{"BLOCK": 1024, "num_warps": 4}]
    F64: ClassVar[bool] = False

    def stages(self) -> list[Stage]:
        n = float(self.n)
        return [
            Stage(
                "expo",
                flops=3 * STEPS * n,  # exp counted as one
                dram_bytes=8 * n,
                precision="fp32",
                build=self.build,
                tuning=self.TUNING,
                kernels=["expo_kernel"],
            ),
        ]

    def build(self, ws: Any, cfg: Config) -> Launch:
        grid = (triton.cdiv(self.n, cfg["BLOCK"]),)
        k = expo_kernel[grid]
        return Launch(lambda: k(ws["x"], ws["y"], self.n, F64=self.F64, STEPS=STEPS, **cfg), grid)

    def setup(self, device: str, seed: int) -> Any:
        import torch

        g = torch.Generator(device=device).manual_seed(seed)
        x = torch.randn(self.n, device=device, generator=g)
        return {"x": x, "y": torch.empty_like(x)}

    def output(self, ws: Any) -> Any:
        return ws["y"]

    def reference(self, ws: Any) -> Any:
        y = ws["x"].double()
        for _ in range(STEPS):
            y = (y * 0.1).exp() * 0.5
        return y
