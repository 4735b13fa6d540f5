"""y = 2 x + 1 (fp32) of a bf16 vector; what both versions share. They differ in where x becomes fp32: a
``x.float()`` before the launch (CAST_FIRST) or the kernel's own load."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import triton
import triton.language as tl

from kbench.plan.base import Config, KernelPlan, Launch, Stage, param


@triton.jit
def axpb_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    tl.store(y_ptr + offs, 2.0 * x + 1.0, mask=mask)


class Convert(KernelPlan):
    """y = 2 x + 1, x bf16, y fp32."""

    n: int = param(1 << 26, help="elements of x and y", ge=1)
    dtype: Literal["bfloat16", "float16"] = param("bfloat16", help="element type of x (float16: CPU checks)")

    check_params: ClassVar[dict[str, Any]] = {"n": 5000}
    tolerance: ClassVar[dict[str, float]] = {"bfloat16": 1e-6, "float16": 1e-6}
    TUNING: ClassVar[list[Config]] = [{"BLOCK": 4096, "num_warps": 8}]
    CAST_FIRST: ClassVar[bool] = False

    def stages(self) -> list[Stage]:
        n = float(self.n)
        return [
            Stage(
                "axpb",
                flops=2 * n,
                dram_bytes=2 * n + 4 * n,
                precision="fp32",
                build=self.build,
                tuning=self.TUNING,
                kernels=["axpb_kernel"],
            ),
        ]

    def build(self, ws: Any, cfg: Config) -> Launch:
        grid = (triton.cdiv(self.n, cfg["BLOCK"]),)
        k = axpb_kernel[grid]

        def launch() -> None:
            x = ws["x"].float() if self.CAST_FIRST else ws["x"]
            k(x, ws["y"], self.n, **cfg)

        return Launch(launch, grid)

    def setup(self, device: str, seed: int) -> Any:
        import torch

        g = torch.Generator(device=device).manual_seed(seed)
        x = torch.randn(self.n, device=device, generator=g).to(getattr(torch, self.dtype))
        return {"x": x, "y": torch.empty(self.n, device=device)}

    def output(self, ws: Any) -> Any:
        return ws["y"]

    def reference(self, ws: Any) -> Any:
        return 2.0 * ws["x"].double() + 1.0
