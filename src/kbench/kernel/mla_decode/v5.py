"""mla_decode v5: v2's fused flash-decoding with the cache tiles copied by the Tensor Memory Accelerator (TMA, a
tensor descriptor over the cache as [b*t, d+p] rows): one bulk copy per tile instead of every thread's cp.async of
its own 16 bytes, so no per-thread tile addresses are kept in registers (v2: 255 registers and spills; kbench's
spills item)."""

from __future__ import annotations

from typing import ClassVar

import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from kbench.plan.base import Config, Launch, Stage

from ._common import Workspace
from ._triton import queries, softmax_step, visible
from .v2 import MlaDecodeFused


@triton.jit
def mla_v5_fused_kernel(q_nope_ptr, q_pe_ptr, values, keys_pe, o_ptr, scale, s, t, R, H: tl.constexpr,  # type: ignore[no-untyped-def]
                        D: tl.constexpr, P: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                        BRANCH: tl.constexpr = False):  # fmt: skip
    """v2's kernel (_triton.attend) with each cache tile loaded through two tensor descriptors: its first D columns
    (keys, then values) and its last P (the rotary keys). A tile past the sequence's end reads the next sequence's
    rows (zeros past the last): the mask drops them as it drops columns >= t. ``BRANCH`` (v6_branch): the softmax
    step under a runtime branch that is always taken (t > 0); off, the code is v5's as it was."""
    LOG2E: tl.constexpr = 1.4426950408889634
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    b = tl.program_id(1)  # the row blocks of one sequence are launched together: its cache is read once into L2
    qn, qp = queries(q_nope_ptr, q_pe_ptr, b, rows, R, D, P)
    m = tl.full((BLOCK_M,), float("-inf"), tl.float32)
    total = tl.zeros((BLOCK_M,), tl.float32)
    acc = tl.zeros((BLOCK_M, D), tl.float32)
    for c0 in range(0, t, BLOCK_N):
        cols = c0 + tl.arange(0, BLOCK_N)
        v = values.load([b * t + c0, 0])  # [BLOCK_N, D]: keys, then values
        kp = keys_pe.load([b * t + c0, D])  # [BLOCK_N, P]
        sc = (tl.dot(qn, tl.trans(v)) + tl.dot(qp, tl.trans(kp))) * (scale * LOG2E)
        sc = tl.where(visible(rows, cols, s, t, H), sc, float("-inf"))
        if BRANCH:
            prob = tl.zeros((BLOCK_M, BLOCK_N), tl.float32)
            alpha = tl.full((BLOCK_M,), 1.0, tl.float32)
            if t > 0:
                m, alpha, prob, total = softmax_step(sc, m, total)
        else:
            m, alpha, prob, total = softmax_step(sc, m, total)
        acc = acc * alpha[:, None] + tl.dot(prob.to(v.dtype), v)
    out = acc / total[:, None]
    dd = tl.arange(0, D)
    tl.store(o_ptr + (b * R + rows[:, None]) * D + dd[None, :], out.to(o_ptr.dtype.element_ty), mask=rows[:, None] < R)


class MlaDecodeTma(MlaDecodeFused):
    """v2 with the cache tiles copied by TMA (tensor descriptors); v2's tiles."""

    def stages(self) -> list[Stage]:
        return [self.attention_stage(self._build, self.row_tiles(self.TILES), ["mla_v5_fused_kernel"])]

    BRANCH: ClassVar[bool] = False  # the softmax step under a runtime branch (v6_branch)

    def _build(self, ws: Workspace, cfg: Config) -> Launch:
        grid = (triton.cdiv(self.rows, cfg["BLOCK_M"]), self.b)
        kernel, args = mla_v5_fused_kernel[grid], {**self.kernel_args(cfg), **({"BRANCH": True} if self.BRANCH else {})}
        rows = ws.kv.view(self.b * self.t, self.d + self.p)
        shape, strides = [self.b * self.t, self.d + self.p], [self.d + self.p, 1]
        values = TensorDescriptor(rows, shape, strides, [cfg["BLOCK_N"], self.d])
        keys_pe = TensorDescriptor(rows, shape, strides, [cfg["BLOCK_N"], self.p])
        return Launch(lambda: kernel(ws.q_nope, ws.q_pe, values, keys_pe, ws.out, **args), grid)


PLAN = MlaDecodeTma
