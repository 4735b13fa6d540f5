"""C = gelu(A @ B + bias) in fp16 (fp32 accumulation), gelu's tanh approximation written with tl.exp2. What both
versions share: the plan, the cost model (the GEMM's FLOPs; A, B, bias read and C written once) and the kernels.
gemm_kernel (128 x 128 x 64 tiles on 8 warps, GROUP_M tile order) ends either in the epilogue (FUSED: bias, gelu,
fp16 C) or in a store of the fp32 accumulator to the workspace's `acc`; epilogue_kernel then reads `acc` and bias
and writes C."""

from __future__ import annotations

import math
from typing import Any, ClassVar, Literal

import triton
import triton.language as tl
from pydantic import model_validator

from kbench.plan.base import Config, KernelPlan, Launch, Stage, param

# gelu(x) = x / 2 (1 + tanh(c (x + 0.044715 x^3))), tanh(u) = 1 - 2 / (1 + e^(2u)); 2u log2(e) folded into one factor
TWO_C_LOG2E = 2.0 * math.sqrt(2.0 / math.pi) * math.log2(math.e)


@triton.jit
def gelu_bias(x, bias, TWO_C_LOG2E: tl.constexpr):  # type: ignore[no-untyped-def]
    """gelu(x + bias) in fp32 (tanh approximation), bias broadcast along rows."""
    x = x + bias[None, :]
    e = tl.math.exp2(TWO_C_LOG2E * (x + 0.044715 * x * x * x))
    return 0.5 * x * (2.0 - 2.0 / (1.0 + e))


@triton.jit
def gemm_kernel(a_ptr, b_ptr, bias_ptr, out_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, FUSED: tl.constexpr,
                TWO_C_LOG2E: tl.constexpr):  # fmt: skip
    pid = tl.program_id(0)
    grid_m = tl.cdiv(M, BLOCK_M)
    grid_n = tl.cdiv(N, BLOCK_N)
    # GROUP_M rows of tiles run together and share B's tiles in L2
    per_group = GROUP_M * grid_n
    first_m = (pid // per_group) * GROUP_M
    size_m = min(grid_m - first_m, GROUP_M)
    pid_m = first_m + (pid % per_group) % size_m
    pid_n = (pid % per_group) // size_m
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        a = tl.load(a_ptr + rm[:, None].to(tl.int64) * K + (k0 + rk)[None, :])
        b = tl.load(b_ptr + (k0 + rk)[:, None].to(tl.int64) * N + rn[None, :])
        acc = tl.dot(a, b, acc)
    out = out_ptr + rm[:, None].to(tl.int64) * N + rn[None, :]
    if FUSED:
        tl.store(out, gelu_bias(acc, tl.load(bias_ptr + rn), TWO_C_LOG2E).to(tl.float16))
    else:
        tl.store(out, acc)


@triton.jit
def epilogue_kernel(acc_ptr, bias_ptr, c_ptr, N, BLOCK: tl.constexpr, TWO_C_LOG2E: tl.constexpr):
    """One row's BLOCK columns of C from the stored fp32 products."""
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(acc_ptr + row * N + cols)[None, :]
    y = gelu_bias(x, tl.load(bias_ptr + cols), TWO_C_LOG2E)
    tl.store(c_ptr + row * N + cols[None, :], y.to(tl.float16))


class GemmGelu(KernelPlan):
    """C[m, n] = gelu(A[m, k] @ B[k, n] + bias[n]), fp16."""

    m: int = param(8448, help="rows of A and C, a multiple of 128 (8448: 66 x 64 tiles, 16 waves of 264)", ge=128)
    n: int = param(8192, help="columns of B and C, a multiple of 2048", ge=2048)
    k: int = param(2048, help="inner dimension, a multiple of 64", ge=64)
    dtype: Literal["float16"] = param("float16", help="element type of A, B, bias and C")

    check_params: ClassVar[dict[str, Any]] = {"m": 128, "n": 2048, "k": 128}
    TILE: ClassVar[Config] = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8, "num_warps": 8,
                              "num_stages": 3}  # fmt: skip
    EPILOGUE_BLOCK: ClassVar[int] = 2048  # columns per epilogue_kernel program (8 warps: 8 fp32 a thread)
    KERNELS: ClassVar[list[str]] = []

    @model_validator(mode="after")
    def _whole_tiles(self) -> GemmGelu:
        if self.m % 128 or self.n % 2048 or self.k % 64:
            raise ValueError(f"m={self.m}, n={self.n}, k={self.k}: the kernels take whole tiles (no masks)")
        return self

    def stages(self) -> list[Stage]:
        m, n, k = float(self.m), float(self.n), float(self.k)
        return [
            Stage(
                "gemm_gelu",
                flops=2.0 * m * n * k,
                dram_bytes=2.0 * (m * k + k * n + n + m * n),
                precision="fp16",
                build=self.build,
                tuning=[self.TILE],
                kernels=self.KERNELS,
            )
        ]

    def gemm(self, ws: Any, cfg: Config, out: Any, fused: bool) -> tuple[Any, tuple[int, ...]]:
        """The GEMM's launch: its grid and a callable writing C (fused) or the fp32 products to ``out``."""
        grid = (triton.cdiv(self.m, cfg["BLOCK_M"]) * triton.cdiv(self.n, cfg["BLOCK_N"]),)
        kernel = gemm_kernel[grid]
        args = (ws["a"], ws["b"], ws["bias"], out, self.m, self.n, self.k)
        return (lambda: kernel(*args, FUSED=fused, TWO_C_LOG2E=TWO_C_LOG2E, **cfg)), grid

    def build(self, ws: Any, cfg: Config) -> Launch:
        raise NotImplementedError

    def setup(self, device: str, seed: int) -> Any:
        import torch

        g = torch.Generator(device=device).manual_seed(seed)
        # A's rows scaled by 1/sqrt(k): A @ B of unit variance, where gelu bends
        a = (torch.randn(self.m, self.k, device=device, generator=g) / math.sqrt(self.k)).half()
        return {
            "a": a,
            "b": torch.randn(self.k, self.n, device=device, generator=g).half(),
            "bias": torch.randn(self.n, device=device, generator=g).half(),
            "c": torch.empty(self.m, self.n, device=device, dtype=torch.float16),
            **self.scratch(device),
        }

    def scratch(self, device: str) -> dict[str, Any]:
        """Workspace tensors a version adds (the fp32 products of `before`)."""
        return {}

    def output(self, ws: Any) -> Any:
        return ws["c"]

    def reference(self, ws: Any) -> Any:
        import torch

        x = ws["a"].double() @ ws["b"].double() + ws["bias"].double()
        return torch.nn.functional.gelu(x, approximate="tanh")
