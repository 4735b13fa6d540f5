"""out[0] = max |x|, one BLOCK tile per program reduced on chip and gathered by one scalar atomic max per program;
what both versions share. They differ in where |x| is taken: ``x.abs()`` before the launch (ABS_FIRST) or the
kernel."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import triton
import triton.language as tl

from kbench.plan.base import Config, KernelPlan, Launch, Stage, param


@triton.jit
def absmax_kernel(x_ptr, out_ptr, n, TAKE_ABS: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    if TAKE_ABS:
        x = tl.abs(x)
    tl.atomic_max(out_ptr, tl.max(x, axis=0))


class AbsMax(KernelPlan):
    """out[0] = max |x|."""

    n: int = param(1 << 26, help="elements of x", ge=1)
    dtype: Literal["float32"] = param("float32", help="element type")

    check_params: ClassVar[dict[str, Any]] = {"n": 5000}
    tolerance: ClassVar[dict[str, float]] = {"float32": 1e-6}
    TUNING: ClassVar[list[Config]] = [{"BLOCK": 16384, "num_warps": 8}]
    ABS_FIRST: ClassVar[bool] = False

    def stages(self) -> list[Stage]:
        n = float(self.n)
        return [
            Stage(
                "amax",
                flops=n,
                dram_bytes=4 * n + 4,
                precision="fp32",
                build=self.build,
                tuning=self.TUNING,
                kernels=["absmax_kernel"],
            ),
        ]

    def build(self, ws: Any, cfg: Config) -> Launch:
        grid = (triton.cdiv(self.n, cfg["BLOCK"]),)
        k = absmax_kernel[grid]

        def launch() -> None:
            ws["out"].zero_()
            if self.ABS_FIRST:
                k(ws["x"].abs(), ws["out"], self.n, TAKE_ABS=False, **cfg)
            else:
                k(ws["x"], ws["out"], self.n, TAKE_ABS=True, **cfg)

        return Launch(launch, grid)

    def setup(self, device: str, seed: int) -> Any:
        import torch

        g = torch.Generator(device=device).manual_seed(seed)
        x = torch.randn(self.n, device=device, generator=g)
        return {"x": x, "out": torch.zeros(1, device=device)}

    def output(self, ws: Any) -> Any:
        return ws["out"]

    def reference(self, ws: Any) -> Any:
        return ws["x"].double().abs().max().reshape(1)
