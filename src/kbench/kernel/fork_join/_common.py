"""What the fork_join versions share: kernels, parameters, workspace, cost model and reference.

out[m, n] = A[m, k] @ B[k, n] + rowsum(Z[m, w])[:, None]. The matmul (compute-bound) and the row sum
(memory-bound) do not depend on each other, so they can run at the same time on two streams; the combine needs
both. The versions differ only in the streams their stages are declared on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import triton
import triton.language as tl

from kbench.kernel.matmul._triton import mm_kernel
from kbench.plan.base import Config, KernelPlan, Launch, Stage, param


@triton.jit
def rowsum_kernel(z_ptr, r_ptr, W, s_zm, BLOCK_W: tl.constexpr):  # type: ignore[no-untyped-def]
    row = tl.program_id(0).to(tl.int64)
    acc = tl.zeros((BLOCK_W,), dtype=tl.float32)
    for w0 in range(0, W, BLOCK_W):
        cols = w0 + tl.arange(0, BLOCK_W)
        acc += tl.load(z_ptr + row * s_zm + cols, mask=cols < W, other=0.0).to(tl.float32)
    tl.store(r_ptr + row, tl.sum(acc, axis=0))


@triton.jit
def combine_kernel(c_ptr, r_ptr, out_ptr, total, N, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < total
    c = tl.load(c_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    r = tl.load(r_ptr + offs // N, mask=mask, other=0.0)
    tl.store(out_ptr + offs, (c + r).to(out_ptr.dtype.element_ty), mask=mask)


@dataclass
class Workspace:
    a: Any
    b: Any
    c: Any  # the matmul's result
    z: Any
    r: Any  # the row sums, float32
    out: Any


class ForkJoinPlan(KernelPlan):
    """out = A @ B + rowsum(Z)[:, None]."""

    m: int = param(4096, help="rows of A, Z and out", ge=1, le=65536)
    n: int = param(4096, help="columns of B and out", ge=1, le=65536)
    k: int = param(4096, help="inner dimension of the matmul", ge=1, le=65536)
    w: int = param(65536, help="columns of Z (the row sum's length)", ge=1, le=1 << 20)
    dtype: Literal["bfloat16", "float16"] = param("bfloat16", help="element type of A, B, Z and out")

    check_params: ClassVar[dict[str, Any]] = {"m": 70, "n": 48, "k": 40, "w": 300}
    # stream of each stage: mm, rowsum, combine (0 = the caller's stream)
    STREAMS: ClassVar[tuple[int, int, int]] = (0, 0, 0)
    MM: ClassVar[Config] = {
        "BLOCK_M": 128,
        "BLOCK_N": 128,
        "BLOCK_K": 64,
        "GROUP_M": 8,
        "num_warps": 8,
        "num_stages": 3,
    }
    ROWSUM: ClassVar[Config] = {"BLOCK_W": 2048, "num_warps": 8}
    COMBINE: ClassVar[Config] = {"BLOCK": 1024, "num_warps": 4}

    def stages(self) -> list[Stage]:
        e = self.element_bytes()
        mm, rowsum, combine = self.STREAMS
        return [
            Stage(
                "mm",
                flops=2.0 * self.m * self.n * self.k,
                dram_bytes=float(e * (self.m * self.k + self.k * self.n + self.m * self.n)),
                precision="bf16" if self.dtype == "bfloat16" else "fp16",
                build=self._build_mm,
                tuning=[self.MM],
                kernels=["mm_kernel"],
                stream=mm,
            ),
            Stage(
                "rowsum",
                flops=float(self.m * self.w),
                dram_bytes=float(e * self.m * self.w + 4 * self.m),
                precision="fp32",
                build=self._build_rowsum,
                tuning=[self.ROWSUM],
                kernels=["rowsum_kernel"],
                stream=rowsum,
            ),
            Stage(
                "combine",
                flops=float(self.m * self.n),
                dram_bytes=float(2 * e * self.m * self.n + 4 * self.m),
                precision="fp32",
                build=self._build_combine,
                tuning=[self.COMBINE],
                kernels=["combine_kernel"],
                stream=combine,
                after=("mm", "rowsum"),
            ),
        ]

    def _build_mm(self, ws: Workspace, cfg: Config) -> Launch:
        grid = (triton.cdiv(self.m, cfg["BLOCK_M"]) * triton.cdiv(self.n, cfg["BLOCK_N"]),)
        kernel = mm_kernel[grid]
        import torch

        unused = torch.zeros(1, dtype=torch.int64, device=ws.c.device)  # the profiler buffer: this plan records none
        args = (ws.a, ws.b, ws.c, self.m, self.n, self.k, *ws.a.stride(), *ws.b.stride(), *ws.c.stride(), unused)
        return Launch(lambda: kernel(*args, **cfg), grid)

    def _build_rowsum(self, ws: Workspace, cfg: Config) -> Launch:
        grid = (self.m,)
        kernel = rowsum_kernel[grid]
        return Launch(lambda: kernel(ws.z, ws.r, self.w, ws.z.stride(0), **cfg), grid)

    def _build_combine(self, ws: Workspace, cfg: Config) -> Launch:
        grid = (triton.cdiv(self.m * self.n, cfg["BLOCK"]),)
        kernel = combine_kernel[grid]
        return Launch(lambda: kernel(ws.c, ws.r, ws.out, self.m * self.n, self.n, **cfg), grid)

    def setup(self, device: str, seed: int) -> Workspace:
        import torch

        g = torch.Generator(device=device).manual_seed(seed)
        dt = self.torch_dtype()
        a = torch.randn(self.m, self.k, device=device, generator=g).to(dt)
        b = torch.randn(self.k, self.n, device=device, generator=g).to(dt)
        z = torch.randn(self.m, self.w, device=device, generator=g).to(dt)
        c = torch.empty(self.m, self.n, device=device, dtype=dt)
        r = torch.empty(self.m, device=device, dtype=torch.float32)
        return Workspace(a, b, c, z, r, torch.empty_like(c))

    def output(self, ws: Workspace) -> Any:
        return ws.out

    def reference(self, ws: Workspace) -> Any:
        return (ws.a.double() @ ws.b.double() + ws.z.double().sum(1)[:, None]).to(self.torch_dtype())
