"""tile_mm fma: the products as fp32 outer products, one k at a time (CUDA-core FMAs): tensor cores idle."""

from __future__ import annotations

from typing import Any, ClassVar

import triton
import triton.language as tl

from kbench.plan.base import Config, Launch

from ._common import TileMatmul


@triton.jit
def fma_mm_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K):
        a = tl.load(a_ptr + rm * K + k, mask=rm < M, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + k * N + rn, mask=rn < N, other=0.0).to(tl.float32)
        acc += a[:, None] * b[None, :]
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(tl.float16), mask=(rm[:, None] < M) & (rn[None, :] < N))


class Fma(TileMatmul):
    """fp32 outer products on the CUDA cores."""

    TUNING: ClassVar[list[Config]] = [{"BM": 64, "BN": 64, "num_warps": 4}]

    def stages(self) -> list[Any]:
        return [s.__class__(**{**s.__dict__, "kernels": ["fma_mm_kernel"]}) for s in super().stages()]

    def build(self, ws: Any, cfg: Config) -> Launch:
        grid = (triton.cdiv(self.m, cfg["BM"]), triton.cdiv(self.n, cfg["BN"]))
        kernel = fma_mm_kernel[grid]
        return Launch(lambda: kernel(ws["a"], ws["b"], ws["c"], self.m, self.n, self.k, **cfg), grid)


PLAN = Fma
