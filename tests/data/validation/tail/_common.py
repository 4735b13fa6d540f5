"""out[r] = sum over c of p(x[r, c]), p a 128-step fp32 FMA recurrence (compute-bound); what both versions share.
Each CTA is 32 warps holding 16 values per thread, so one CTA fills an SM."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import triton
import triton.language as tl

from kbench.plan.base import Config, KernelPlan, Launch, Stage, param

STEPS = 128


@triton.jit
def poly_sum_kernel(x_ptr, out_ptr, cols, per_cta, STEPS: tl.constexpr, BLOCK: tl.constexpr):
    r = tl.program_id(0).to(tl.int64)
    start = tl.program_id(1) * per_cta
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for c0 in range(0, per_cta, BLOCK):
        offs = start + c0 + tl.arange(0, BLOCK)
        mask = (offs < cols) & (c0 + tl.arange(0, BLOCK) < per_cta)
        x = tl.load(x_ptr + r * cols + offs, mask=mask, other=0.0)
        v = x
        for _ in range(STEPS):
            v = v * 0.999 + x
        acc += tl.where(mask, v, 0.0)
    tl.atomic_add(out_ptr + r, tl.sum(acc, axis=0))


class PolySum(KernelPlan):
    """out[r] = sum_c p(x[r, c])."""

    rows: int = param(144, help="rows of x (one CTA each, split SPLIT ways)", ge=1)
    cols: int = param(1 << 20, help="columns of x", ge=1)
    dtype: Literal["float32"] = param("float32", help="element type")

    check_params: ClassVar[dict[str, Any]] = {"rows": 3, "cols": 5000}
    tolerance: ClassVar[dict[str, float]] = {"float32": 1e-4}
    SPLIT: ClassVar[int] = 1

    def stages(self) -> list[Stage]:
        n = float(self.rows * self.cols)
        return [
            Stage(
                "poly",
                flops=2.0 * STEPS * n,
                dram_bytes=4.0 * (n + self.rows),
                precision="fp32",
                build=self.build,
                tuning=[{"BLOCK": 16384, "num_warps": 32}],
                kernels=["poly_sum_kernel"],
            ),
        ]

    def build(self, ws: Any, cfg: Config) -> Launch:
        grid = (self.rows, self.SPLIT)
        per_cta = triton.cdiv(self.cols, self.SPLIT)
        k = poly_sum_kernel[grid]

        def launch() -> None:
            ws["out"].zero_()
            k(ws["x"], ws["out"], self.cols, per_cta, STEPS=STEPS, **cfg)

        return Launch(launch, grid)

    def setup(self, device: str, seed: int) -> Any:
        import torch

        g = torch.Generator(device=device).manual_seed(seed)
        x = torch.rand(self.rows, self.cols, device=device, generator=g)
        return {"x": x, "out": torch.empty(self.rows, device=device)}

    def output(self, ws: Any) -> Any:
        return ws["out"]

    def reference(self, ws: Any) -> Any:
        x = ws["x"].double()
        v = x
        for _ in range(STEPS):
            v = v * 0.999 + x
        return v.sum(dim=1)
