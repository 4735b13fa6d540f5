"""C = tril(A @ B) in fp16 (fp32 accumulation), C n x n with zeros above the diagonal; what both versions share. The
kernel differs only in SKIP: whether a tile entirely above the diagonal runs its K loop."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import triton
import triton.language as tl

from kbench.plan.base import Config, KernelPlan, Launch, Stage, param


@triton.jit
def tril_mm_kernel(a_ptr, b_ptr, c_ptr, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                   SKIP: tl.constexpr):  # fmt: skip
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    k_end = K
    if SKIP:  # a tile whose every column is right of its every row is all above the diagonal: no products
        k_end = tl.where(pid_n * BN >= (pid_m + 1) * BM, 0, K)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, k_end, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k0 + rk)[None, :], mask=(rm[:, None] < N) & ((k0 + rk)[None, :] < K),
                    other=0.0)  # fmt: skip
        b = tl.load(b_ptr + (k0 + rk)[:, None] * N + rn[None, :], mask=((k0 + rk)[:, None] < K) & (rn[None, :] < N),
                    other=0.0)  # fmt: skip
        acc = tl.dot(a, b, acc)
    c = tl.where(rn[None, :] <= rm[:, None], acc, 0.0).to(tl.float16)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], c, mask=(rm[:, None] < N) & (rn[None, :] < N))


class TrilMatmul(KernelPlan):
    """C = tril(A[n, k] @ B[k, n]), fp16."""

    n: int = param(4096, help="rows and columns of C (A is n x k, B k x n)", ge=1)
    k: int = param(4096, help="inner dimension", ge=1)
    dtype: Literal["float16"] = param("float16", help="element type")

    check_params: ClassVar[dict[str, Any]] = {"n": 300, "k": 96}
    SKIP: ClassVar[bool] = False

    def stages(self) -> list[Stage]:
        lower = self.n * (self.n + 1) / 2  # elements on or below the diagonal
        return [
            Stage(
                "trimm",
                flops=2.0 * self.k * lower,
                dram_bytes=2.0 * (2 * self.n * self.k + self.n * self.n),
                precision="fp16",
                build=self.build,
                tuning=[{"BM": 128, "BN": 128, "BK": 64, "num_warps": 8, "num_stages": 3}],
                kernels=["tril_mm_kernel"],
            )
        ]

    def build(self, ws: Any, cfg: Config) -> Launch:
        grid = (triton.cdiv(self.n, cfg["BM"]), triton.cdiv(self.n, cfg["BN"]))
        kernel = tril_mm_kernel[grid]
        args = (ws["a"], ws["b"], ws["c"], self.n, self.k)
        return Launch(lambda: kernel(*args, SKIP=self.SKIP, **cfg), grid)

    def setup(self, device: str, seed: int) -> Any:
        import torch

        g = torch.Generator(device=device).manual_seed(seed)
        a = torch.randn(self.n, self.k, device=device, generator=g).half()
        b = torch.randn(self.k, self.n, device=device, generator=g).half()
        return {"a": a, "b": b, "c": torch.empty(self.n, self.n, device=device, dtype=torch.float16)}

    def output(self, ws: Any) -> Any:
        return ws["c"]

    def reference(self, ws: Any) -> Any:
        return (ws["a"].double() @ ws["b"].double()).tril().half()
