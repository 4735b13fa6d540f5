"""C = A @ B in fp16 (fp32 accumulation). What both versions share: the plan, the cost model (2MNK FLOPs; A, B read
and C written once) and the kernels. mm_kernel (128 x 128 x 64 tiles on 8 warps, GROUP_M tile order) computes one
tile over one of SPLITS slices of K (program_id(1)) and stores it to `out` at that slice's [M, N] plane: fp16 C
when SPLITS is 1, else the workspace's fp32 `partials` [SPLITS, M, N], which sum_kernel adds into C."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import triton
import triton.language as tl
from pydantic import model_validator

from kbench.plan.base import Config, KernelPlan, Launch, Stage, param


@triton.jit
def mm_kernel(a_ptr, b_ptr, out_ptr, M, N, K, k_per, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
              BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):  # fmt: skip
    pid = tl.program_id(0)
    split = tl.program_id(1)  # slowest: every tile of one split runs before the next split's (A and B reuse in L2)
    grid_m = tl.cdiv(M, BLOCK_M)
    grid_n = tl.cdiv(N, BLOCK_N)
    per_group = GROUP_M * grid_n
    first_m = (pid // per_group) * GROUP_M
    size_m = min(grid_m - first_m, GROUP_M)
    pid_m = first_m + (pid % per_group) % size_m
    pid_n = (pid % per_group) // size_m
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(split * k_per, (split + 1) * k_per, BLOCK_K):
        a = tl.load(a_ptr + rm[:, None].to(tl.int64) * K + (k0 + rk)[None, :])
        b = tl.load(b_ptr + (k0 + rk)[:, None].to(tl.int64) * N + rn[None, :])
        acc = tl.dot(a, b, acc)
    plane = out_ptr + split.to(tl.int64) * M * N
    tl.store(plane + rm[:, None].to(tl.int64) * N + rn[None, :], acc.to(out_ptr.dtype.element_ty))


@triton.jit
def sum_kernel(part_ptr, c_ptr, M, N, SPLITS: tl.constexpr, BLOCK: tl.constexpr):
    """BLOCK columns of one row of C: the SPLITS partial products added in fp32."""
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for s in tl.static_range(SPLITS):
        acc += tl.load(part_ptr + (s * M + row) * N + cols)
    tl.store(c_ptr + row * N + cols, acc.to(tl.float16))


class SplitMatmul(KernelPlan):
    """C[m, n] = A[m, k] @ B[k, n], fp16."""

    m: int = param(4224, help="rows of A and C, a multiple of 128 (4224: 33 x 32 tiles, 4 waves of 264)", ge=128)
    n: int = param(4096, help="columns of B and C, a multiple of 2048", ge=2048)
    k: int = param(8192, help="inner dimension, a multiple of 256 (64 per split)", ge=256)
    dtype: Literal["float16"] = param("float16", help="element type of A, B and C")

    check_params: ClassVar[dict[str, Any]] = {"m": 128, "n": 2048, "k": 256}
    TILE: ClassVar[Config] = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8, "num_warps": 8,
                              "num_stages": 3}  # fmt: skip
    SUM_BLOCK: ClassVar[int] = 2048  # columns per sum_kernel program (8 warps: 8 fp32 a thread per partial)
    SPLITS: ClassVar[int] = 1
    KERNELS: ClassVar[list[str]] = []

    @model_validator(mode="after")
    def _whole_tiles(self) -> SplitMatmul:
        if self.m % 128 or self.n % 2048 or self.k % 256:
            raise ValueError(f"m={self.m}, n={self.n}, k={self.k}: the kernels take whole tiles (no masks)")
        return self

    def stages(self) -> list[Stage]:
        m, n, k = float(self.m), float(self.n), float(self.k)
        return [
            Stage(
                "mm",
                flops=2.0 * m * n * k,
                dram_bytes=2.0 * (m * k + k * n + m * n),
                precision="fp16",
                build=self.build,
                tuning=[self.TILE],
                kernels=self.KERNELS,
            )
        ]

    def mm(self, ws: Any, cfg: Config, out: Any) -> tuple[Any, tuple[int, ...]]:
        """mm_kernel's launch over SPLITS slices of K, writing ``out``, and its grid."""
        grid = (triton.cdiv(self.m, cfg["BLOCK_M"]) * triton.cdiv(self.n, cfg["BLOCK_N"]), self.SPLITS)
        kernel = mm_kernel[grid]
        args = (ws["a"], ws["b"], out, self.m, self.n, self.k, self.k // self.SPLITS)
        return (lambda: kernel(*args, **cfg)), grid

    def build(self, ws: Any, cfg: Config) -> Launch:
        raise NotImplementedError

    def setup(self, device: str, seed: int) -> Any:
        import torch

        g = torch.Generator(device=device).manual_seed(seed)
        return {
            "a": torch.randn(self.m, self.k, device=device, generator=g).half(),
            "b": torch.randn(self.k, self.n, device=device, generator=g).half(),
            "c": torch.empty(self.m, self.n, device=device, dtype=torch.float16),
            **self.scratch(device),
        }

    def scratch(self, device: str) -> dict[str, Any]:
        """Workspace tensors a version adds (the fp32 partials of `before`)."""
        return {}

    def output(self, ws: Any) -> Any:
        return ws["c"]

    def reference(self, ws: Any) -> Any:
        return ws["a"].double() @ ws["b"].double()
