"""y_i = sum_{j<K} exp(x_i - c_j) (fp32); what both versions share. FACTORED: exp(x_i) times a sum of exp(-c_j)
taken once per program, instead of K exps per element."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import triton
import triton.language as tl

from kbench.plan.base import Config, KernelPlan, Launch, Stage, param


@triton.jit
def expsum_kernel(x_ptr, c_ptr, y_ptr, n, K: tl.constexpr, FACTORED: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    if FACTORED:
        s = 0.0
        for j in range(K):
            s += tl.exp(-tl.load(c_ptr + j))
        acc = tl.exp(x) * s
    else:
        for j in range(K):
            acc += tl.exp(x - tl.load(c_ptr + j))
    tl.store(y_ptr + offs, acc, mask=mask)


class ExpSum(KernelPlan):
    """y_i = sum_j exp(x_i - c_j)."""

    n: int = param(1 << 24, help="elements of x and y", ge=1)
    k: int = param(64, help="centres c_j", ge=1)
    dtype: Literal["float32"] = param("float32", help="element type")

    check_params: ClassVar[dict[str, Any]] = {"n": 5000, "k": 64}
    tolerance: ClassVar[dict[str, float]] = {"float32": 1e-5}
    TUNING: ClassVar[list[Config]] = [{"BLOCK": 1024, "num_warps": 4}]
    FACTORED: ClassVar[bool] = False

    def stages(self) -> list[Stage]:
        n, k = float(self.n), float(self.k)
        return [
            Stage(
                "expsum",
                flops=3 * n * k,  # a subtraction, an exponential and an addition per term
                dram_bytes=8 * n + 4 * k,
                precision="fp32",
                build=self.build,
                tuning=self.TUNING,
                kernels=["expsum_kernel"],
            ),
        ]

    def build(self, ws: Any, cfg: Config) -> Launch:
        grid = (triton.cdiv(self.n, cfg["BLOCK"]),)
        k = expsum_kernel[grid]
        return Launch(lambda: k(ws["x"], ws["c"], ws["y"], self.n, K=self.k, FACTORED=self.FACTORED, **cfg), grid)

    def setup(self, device: str, seed: int) -> Any:
        import torch

        g = torch.Generator(device=device).manual_seed(seed)
        x = torch.rand(self.n, device=device, generator=g)
        c = torch.rand(self.k, device=device, generator=g)
        return {"x": x, "c": c, "y": torch.empty_like(x)}

    def output(self, ws: Any) -> Any:
        return ws["y"]

    def reference(self, ws: Any) -> Any:
        x, c = ws["x"].double(), ws["c"].double()
        return (x[:, None] - c[None, :]).exp().sum(dim=1)
