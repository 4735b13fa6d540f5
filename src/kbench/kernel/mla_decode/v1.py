"""mla_decode v1: Triton, unfused: scores, softmax and P.V as three kernels, each going through HBM."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import triton
import triton.language as tl

from kbench.plan.base import Config, Launch, Precision, Stage

from ._common import MlaDecode, Workspace
from ._triton import qk_block, visible


@dataclass
class UnfusedWorkspace(Workspace):
    scores: Any  # [b, s*h, t] fp32
    probs: Any  # [b, s*h, t] in the plan's dtype


@triton.jit
def mla_v1_scores_kernel(q_nope_ptr, q_pe_ptr, kv_ptr, s_ptr, scale, s, t, R, H: tl.constexpr,  # type: ignore[no-untyped-def]
                         D: tl.constexpr, P: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                         BLOCK_D: tl.constexpr):  # fmt: skip
    b = tl.program_id(0)
    rows = tl.program_id(1) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(2) * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = qk_block(q_nope_ptr, q_pe_ptr, kv_ptr, b, rows, cols, R, t, D, P, BLOCK_D) * scale
    acc = tl.where(visible(rows, cols, s, t, H), acc, float("-inf"))
    tl.store(s_ptr + (b * R + rows[:, None]) * t + cols[None, :], acc, mask=(rows[:, None] < R) & (cols[None, :] < t))


@triton.jit
def mla_v1_softmax_kernel(s_ptr, p_ptr, t, BLOCK_T: tl.constexpr):  # type: ignore[no-untyped-def]
    row = tl.program_id(0).to(tl.int64)
    m = tl.full((BLOCK_T,), float("-inf"), tl.float32)
    for t0 in range(0, t, BLOCK_T):
        cols = t0 + tl.arange(0, BLOCK_T)
        m = tl.maximum(m, tl.load(s_ptr + row * t + cols, mask=cols < t, other=float("-inf")))
    top = tl.max(m, axis=0)
    total = tl.zeros((BLOCK_T,), tl.float32)
    for t0 in range(0, t, BLOCK_T):
        cols = t0 + tl.arange(0, BLOCK_T)
        total += tl.exp(tl.load(s_ptr + row * t + cols, mask=cols < t, other=float("-inf")) - top)
    inv = 1.0 / tl.sum(total, axis=0)
    for t0 in range(0, t, BLOCK_T):
        cols = t0 + tl.arange(0, BLOCK_T)
        x = tl.load(s_ptr + row * t + cols, mask=cols < t, other=float("-inf"))
        tl.store(p_ptr + row * t + cols, (tl.exp(x - top) * inv).to(p_ptr.dtype.element_ty), mask=cols < t)


@triton.jit
def mla_v1_pv_kernel(p_ptr, kv_ptr, o_ptr, t, R, D: tl.constexpr, P: tl.constexpr,  # type: ignore[no-untyped-def]
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr):  # fmt: skip
    b = tl.program_id(0)
    rows = tl.program_id(1) * BLOCK_M + tl.arange(0, BLOCK_M)
    dd = tl.program_id(2) * BLOCK_D + tl.arange(0, BLOCK_D)
    acc = tl.zeros((BLOCK_M, BLOCK_D), dtype=tl.float32)
    for t0 in range(0, t, BLOCK_N):
        cols = t0 + tl.arange(0, BLOCK_N)
        inside = (rows[:, None] < R) & (cols[None, :] < t)
        pr = tl.load(p_ptr + (b * R + rows[:, None]) * t + cols[None, :], mask=inside, other=0.0)
        v = tl.load(kv_ptr + (b * t + cols[:, None]) * (D + P) + dd[None, :], mask=cols[:, None] < t, other=0.0)
        acc += tl.dot(pr, v)
    tl.store(o_ptr + (b * R + rows[:, None]) * D + dd[None, :], acc.to(o_ptr.dtype.element_ty),
             mask=rows[:, None] < R)  # fmt: skip


class MlaDecodeUnfused(MlaDecode):
    """Three Triton kernels: scores (fp32 to HBM), softmax (probabilities to HBM), P.V."""

    POW2_WIDTHS: ClassVar[bool] = True
    FP32_AS: ClassVar[Precision] = "tf32"
    TILES: ClassVar[list[Config]] = [
        {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_D": 64, "num_warps": 4},
        {"BLOCK_M": 32, "BLOCK_N": 64, "BLOCK_D": 64, "num_warps": 4},
        {"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_D": 64, "num_warps": 8},
    ]

    def setup(self, device: str, seed: int) -> UnfusedWorkspace:
        import torch

        ws = super().setup(device, seed)
        rows = self.rows
        return UnfusedWorkspace(
            **vars(ws),
            scores=torch.empty(self.b, rows, self.t, device=device, dtype=torch.float32),
            probs=torch.empty(self.b, rows, self.t, device=device, dtype=self.torch_dtype()),
        )

    def stages(self) -> list[Stage]:
        n = float(self.b * self.s * self.h * self.t)  # score elements
        e = self.element_bytes()
        return [
            Stage("scores", flops=self.qk_flops(), dram_bytes=self.q_bytes() + self.kv_bytes() + 4 * n,
                  precision=self.precision, build=self._scores, tuning=self.TILES, kernels=["mla_v1_scores_kernel"]),
            Stage("softmax", flops=5 * n, dram_bytes=3 * 4 * n + e * n, precision="fp32", build=self._softmax,
                  tuning=[{"BLOCK_T": 1024, "num_warps": 4}], kernels=["mla_v1_softmax_kernel"]),
            Stage("pv", flops=self.pv_flops(), dram_bytes=e * n + self.kv_bytes(self.d) + self.out_bytes(),
                  precision=self.precision, build=self._pv, tuning=self.TILES, kernels=["mla_v1_pv_kernel"]),
        ]  # fmt: skip

    def _scores(self, ws: UnfusedWorkspace, cfg: Config) -> Launch:
        grid = (self.b, triton.cdiv(self.rows, cfg["BLOCK_M"]), triton.cdiv(self.t, cfg["BLOCK_N"]))
        kernel, args = mla_v1_scores_kernel[grid], self.kernel_args(cfg)
        return Launch(lambda: kernel(ws.q_nope, ws.q_pe, ws.kv, ws.scores, **args), grid)

    def _softmax(self, ws: UnfusedWorkspace, cfg: Config) -> Launch:
        grid = (self.b * self.rows,)
        kernel = mla_v1_softmax_kernel[grid]
        return Launch(lambda: kernel(ws.scores, ws.probs, self.t, **cfg), grid)

    def _pv(self, ws: UnfusedWorkspace, cfg: Config) -> Launch:
        args = self.kernel_args(cfg)
        grid = (self.b, triton.cdiv(self.rows, cfg["BLOCK_M"]), self.d // args["BLOCK_D"])
        kernel = mla_v1_pv_kernel[grid]
        keep = ("t", "R", "D", "P", "BLOCK_D", *cfg)
        return Launch(lambda: kernel(ws.probs, ws.kv, ws.out, **{k: args[k] for k in keep}), grid)


PLAN = MlaDecodeUnfused
