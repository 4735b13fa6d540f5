"""y_i = sum_{k<K} x_i / (c_k + x_i) (fp32); what the versions share. The denominator holds x_i, so no division can
be hoisted out of the loop. DIV picks how each term divides: "rn" (tl.math.div_rn: IEEE div.rn.f32), "full" (`/`:
div.full.f32, 2 ulp) or "rsqrt" (x * rsqrt(d * d): rsqrt.approx.ftz.f32, one MUFU.RSQ, d > 0 here)."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import triton
import triton.language as tl

from kbench.plan.base import Config, KernelPlan, Launch, Stage, param


@triton.jit
def ratio_sum_kernel(x_ptr, c_ptr, y_ptr, n, K: tl.constexpr, DIV: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for k in range(K):
        d = tl.load(c_ptr + k) + x
        if DIV == "rn":
            acc += tl.math.div_rn(x, d)
        elif DIV == "full":
            acc += x / d
        else:
            acc += x * tl.math.rsqrt(d * d)
    tl.store(y_ptr + offs, acc, mask=mask)


class RatioSum(KernelPlan):
    """y_i = sum_k x_i / (c_k + x_i)."""

    n: int = param(1 << 24, help="elements of x and y", ge=1)
    k: int = param(128, help="centres c_k (divisions per element)", ge=1)
    dtype: Literal["float32"] = param("float32", help="element type")

    check_params: ClassVar[dict[str, Any]] = {"n": 5000, "k": 64}
    tolerance: ClassVar[dict[str, float]] = {"float32": 1e-5}
    TUNING: ClassVar[list[Config]] = [{"BLOCK": 1024, "num_warps": 4}]
    DIV: ClassVar[str] = "rn"

    def stages(self) -> list[Stage]:
        n, k = float(self.n), float(self.k)
        return [
            Stage(
                "ratios",
                flops=3 * n * k,  # an addition, a division and an addition per term
                dram_bytes=8 * n + 4 * k,
                precision="fp32",
                build=self.build,
                tuning=self.TUNING,
                kernels=["ratio_sum_kernel"],
            ),
        ]

    def build(self, ws: Any, cfg: Config) -> Launch:
        grid = (triton.cdiv(self.n, cfg["BLOCK"]),)
        kern = ratio_sum_kernel[grid]
        return Launch(lambda: kern(ws["x"], ws["c"], ws["y"], self.n, K=self.k, DIV=self.DIV, **cfg), grid)

    def setup(self, device: str, seed: int) -> Any:
        import torch

        g = torch.Generator(device=device).manual_seed(seed)
        x = torch.rand(self.n, device=device, generator=g)
        c = torch.rand(self.k, device=device, generator=g) + 0.5  # denominators in [0.5, 2.5): no special cases
        return {"x": x, "c": c, "y": torch.empty_like(x)}

    def output(self, ws: Any) -> Any:
        return ws["y"]

    def reference(self, ws: Any) -> Any:
        x = ws["x"].double()
        y = x.new_zeros(x.shape)
        for ck in ws["c"].double().tolist():  # a term at a time: an n x K temporary would be 16 GiB at 2^24 x 128
            y += x / (ck + x)
        return y
