"""out[0] = sum of x, fp32, one BLOCK-element tile per CTA, the result gathered by atomic adds to out[0] (zeroed in
the launch); what both versions share. The kernel differs only in PER_CTA: one atomic per element of the tile or one
per CTA of the tile's sum."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import triton
import triton.language as tl

from kbench.plan.base import Config, KernelPlan, Launch, Stage, param


@triton.jit
def atomic_sum_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr, PER_CTA: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    if PER_CTA:
        tl.atomic_add(out_ptr, tl.sum(x, axis=0))
    else:  # every element to the same address, each with its own atomic
        tl.atomic_add(out_ptr + tl.zeros_like(offs), x, mask=mask)


class AtomicSum(KernelPlan):
    """out[0] = sum(x)."""

    n: int = param(1 << 24, help="elements of x", ge=1)
    dtype: Literal["float32"] = param("float32", help="element type")

    check_params: ClassVar[dict[str, Any]] = {"n": 5000}
    # fp32 adds in an arbitrary order: one atomic per element sums 2^24 values in [0, 1) one at a time into a
    # total near 8e6 (relative error about 5e-5 in a simulation of that order); one per CTA about 3e-6
    tolerance: ClassVar[dict[str, float]] = {"float32": 1e-3}
    TUNING: ClassVar[list[Config]] = [{"BLOCK": 1024, "num_warps": 4}]
    PER_CTA: ClassVar[bool] = False

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
                kernels=["atomic_sum_kernel"],
            ),
        ]

    def build(self, ws: Any, cfg: Config) -> Launch:
        grid = (triton.cdiv(self.n, cfg["BLOCK"]),)
        k = atomic_sum_kernel[grid]

        def launch() -> None:
            ws["out"].zero_()
            k(ws["x"], ws["out"], self.n, PER_CTA=self.PER_CTA, **cfg)

        return Launch(launch, grid)

    def setup(self, device: str, seed: int) -> Any:
        import torch

        g = torch.Generator(device=device).manual_seed(seed)
        x = torch.rand(self.n, device=device, generator=g)  # positive: no cancellation in the sum
        return {"x": x, "out": torch.empty(1, device=device)}

    def output(self, ws: Any) -> Any:
        return ws["out"]

    def reference(self, ws: Any) -> Any:
        return ws["x"].double().sum().reshape(1)
