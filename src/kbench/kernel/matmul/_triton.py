"""The Triton matmul kernel the Triton versions share; they differ in tiling and program order."""

from __future__ import annotations

from typing import ClassVar

import triton
import triton.language as tl

from kbench.kernel.matmul._common import MatmulPlan, Workspace
from kbench.plan.base import Config, Launch
from kbench.plan.intra import Profiler

# the tasks the kernel records with PROFILE=True (--prof_type=intra): task_type i is TritonMatmul.TASKS[i]
MAINLOOP, STORE = tl.constexpr(0), tl.constexpr(1)


@triton.jit
def mm_kernel(  # type: ignore[no-untyped-def]
    a_ptr,
    b_ptr,
    c_ptr,
    M,
    N,
    K,
    s_am,
    s_ak,
    s_bk,
    s_bn,
    s_cm,
    s_cn,
    prof_buf,  # the intra-kernel profiler buffer (one unused word when PROFILE is False)
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    PROFILE: tl.constexpr = False,
):
    profiler = Profiler.create(prof_buf, ENABLE_PROFILING=PROFILE)
    pid = tl.program_id(0)
    grid_m = tl.cdiv(M, BLOCK_M)
    grid_n = tl.cdiv(N, BLOCK_N)
    # GROUP_M rows of tiles share B tiles in L2 (GROUP_M=1: plain row-major order)
    per_group = GROUP_M * grid_n
    first_m = (pid // per_group) * GROUP_M
    size_m = min(grid_m - first_m, GROUP_M)
    pid_m = first_m + (pid % per_group) % size_m
    pid_n = (pid % per_group) // size_m
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    a = a_ptr + rm[:, None] * s_am + rk[None, :] * s_ak
    b = b_ptr + rk[:, None] * s_bk + rn[None, :] * s_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    # the K loop's loads and mma are one task: the compiler pipelines them together (num_stages), and a record
    # inside the loop would stand in the pipeline's way
    profiler = profiler.record(is_start=True, task_type=MAINLOOP)
    for k0 in range(0, K, BLOCK_K):
        a_tile = tl.load(a, mask=(rm[:, None] < M) & (rk[None, :] + k0 < K), other=0.0)
        b_tile = tl.load(b, mask=(rk[:, None] + k0 < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a_tile, b_tile, acc)
        a += BLOCK_K * s_ak
        b += BLOCK_K * s_bk
    profiler = profiler.record(is_start=False, task_type=MAINLOOP)
    profiler = profiler.record(is_start=True, task_type=STORE)
    c = c_ptr + rm[:, None] * s_cm + rn[None, :] * s_cn
    tl.store(c, acc.to(c_ptr.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < N))
    profiler = profiler.record(is_start=False, task_type=STORE)


class TritonMatmul(MatmulPlan):
    KERNELS: ClassVar[list[str]] = ["mm_kernel"]
    TASKS: ClassVar[tuple[str, ...]] = ("mainloop", "store")

    def build_mm(self, ws: Workspace, cfg: Config) -> Launch:
        return self._launch(ws, cfg, ws._no_profile, False)

    def build_mm_intra(self, ws: Workspace, cfg: Config, profiler_buffer: object) -> Launch:
        return self._launch(ws, cfg, profiler_buffer, True)

    def _launch(self, ws: Workspace, cfg: Config, prof_buf: object, profile: bool) -> Launch:
        grid = (triton.cdiv(self.m, cfg["BLOCK_M"]) * triton.cdiv(self.n, cfg["BLOCK_N"]),)
        kernel = mm_kernel[grid]
        args = (ws.a, ws.b, ws.c, self.m, self.n, self.k, *ws.a.stride(), *ws.b.stride(), *ws.c.stride(), prof_buf)
        return Launch(lambda: kernel(*args, PROFILE=profile, **cfg), grid)
