"""C = A @ B in fp16 (fp32 accumulation); what the versions share. The kernel differs only in how a tile's
products are summed (DOT; UPCAST: the fp16 tiles converted to fp32 before tl.dot, tf32 tensor cores) and in its
tiles, warps and stages."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import triton
import triton.language as tl

from kbench.plan.base import Config, KernelPlan, Launch, Stage, param


@triton.jit
def tile_mm_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                   DOT: tl.constexpr, UPCAST: tl.constexpr = False):  # fmt: skip
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k0 + rk)[None, :], mask=(rm[:, None] < M) & ((k0 + rk)[None, :] < K),
                    other=0.0)  # fmt: skip
        b = tl.load(b_ptr + (k0 + rk)[:, None] * N + rn[None, :], mask=((k0 + rk)[:, None] < K) & (rn[None, :] < N),
                    other=0.0)  # fmt: skip
        if DOT:
            if UPCAST:
                acc = tl.dot(a.to(tl.float32), b.to(tl.float32), acc, input_precision="tf32")
            else:
                acc = tl.dot(a, b, acc)
        else:
            acc += tl.sum(a.to(tl.float32)[:, :, None] * b.to(tl.float32)[None, :, :], axis=1)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(tl.float16), mask=(rm[:, None] < M) & (rn[None, :] < N))


class TileMatmul(KernelPlan):
    """C[m, n] = A[m, k] @ B[k, n], fp16."""

    m: int = param(2048, help="rows", ge=1)
    n: int = param(2048, help="columns", ge=1)
    k: int = param(2048, help="inner dimension", ge=1)
    dtype: Literal["float16"] = param("float16", help="element type")

    check_params: ClassVar[dict[str, Any]] = {"m": 64, "n": 64, "k": 64}
    TUNING: ClassVar[list[Config]] = []
    DOT: ClassVar[bool] = False
    UPCAST: ClassVar[bool] = False

    def stages(self) -> list[Stage]:
        return [
            Stage(
                "mm",
                flops=2.0 * self.m * self.n * self.k,
                dram_bytes=2.0 * (self.m * self.k + self.k * self.n + self.m * self.n),
                precision="fp16",
                build=self.build,
                tuning=self.TUNING,
                kernels=["tile_mm_kernel"],
            )
        ]

    def build(self, ws: Any, cfg: Config) -> Launch:
        grid = (triton.cdiv(self.m, cfg["BM"]), triton.cdiv(self.n, cfg["BN"]))
        kernel = tile_mm_kernel[grid]
        args = (ws["a"], ws["b"], ws["c"], self.m, self.n, self.k)
        return Launch(lambda: kernel(*args, DOT=self.DOT, UPCAST=self.UPCAST, **cfg), grid)

    def setup(self, device: str, seed: int) -> Any:
        import torch

        g = torch.Generator(device=device).manual_seed(seed)
        a = torch.randn(self.m, self.k, device=device, generator=g).half()
        b = torch.randn(self.k, self.n, device=device, generator=g).half()
        return {"a": a, "b": b, "c": torch.empty(self.m, self.n, device=device, dtype=torch.float16)}

    def output(self, ws: Any) -> Any:
        return ws["c"]

    def reference(self, ws: Any) -> Any:
        return (ws["a"].double() @ ws["b"].double()).half()
