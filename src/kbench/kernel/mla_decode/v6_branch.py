"""mla_decode v6_branch: v6 with its fused kernel's softmax step under a runtime branch that is always taken (issue
44). v5/v6's 64-row block needs two warpgroups for its 64 x 512 fp32 accumulator, and Triton gives a dot that
feeds another dot to all warps along M: both warpgroups computed the whole Q.K^T (1.53x the model's tensor FLOPs,
kbench's "Work repeated by warpgroups"). Behind the branch the scores dot no longer feeds the second dot directly,
so Triton is free to lay it out over both warpgroups (each computes half of the scores) and converts the
probabilities' layout where the branch ends. Measured first by a user of vLLM's kernel (226.1 us against v6's 246.9 us
at b=32 s=16 t=4096 h=16 on the H100); here a version of its own, so kbench's items can follow it."""

from __future__ import annotations

from typing import ClassVar

import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from kbench.plan.base import Config, Launch, Stage

from ._common import Workspace
from ._triton import queries, softmax_step, visible
from .v5 import MlaDecodeTma
from .v6 import MlaDecodeDispatch


@triton.jit
def mla_v6b_fused_kernel(q_nope_ptr, q_pe_ptr, values, keys_pe, o_ptr, scale, s, t, R, H: tl.constexpr,  # type: ignore[no-untyped-def]
                         D: tl.constexpr, P: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):  # fmt: skip
    """v5's kernel with the online-softmax step inside ``if live:``, ``live`` a runtime value that is always true
    (t > 0): the scores' layout is chosen for their own dot, not for the dot they feed."""
    LOG2E: tl.constexpr = 1.4426950408889634
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    b = tl.program_id(1)
    qn, qp = queries(q_nope_ptr, q_pe_ptr, b, rows, R, D, P)
    m = tl.full((BLOCK_M,), float("-inf"), tl.float32)
    total = tl.zeros((BLOCK_M,), tl.float32)
    acc = tl.zeros((BLOCK_M, D), tl.float32)
    live = t > 0
    for c0 in range(0, t, BLOCK_N):
        cols = c0 + tl.arange(0, BLOCK_N)
        v = values.load([b * t + c0, 0])  # [BLOCK_N, D]: keys, then values
        kp = keys_pe.load([b * t + c0, D])  # [BLOCK_N, P]
        sc = (tl.dot(qn, tl.trans(v)) + tl.dot(qp, tl.trans(kp))) * (scale * LOG2E)
        sc = tl.where(visible(rows, cols, s, t, H), sc, float("-inf"))
        prob = tl.zeros((BLOCK_M, BLOCK_N), tl.float32)
        alpha = tl.full((BLOCK_M,), 1.0, tl.float32)
        if live:
            m, alpha, prob, total = softmax_step(sc, m, total)
        acc = acc * alpha[:, None] + tl.dot(prob.to(v.dtype), v)
    out = acc / total[:, None]
    dd = tl.arange(0, D)
    tl.store(o_ptr + (b * R + rows[:, None]) * D + dd[None, :], out.to(o_ptr.dtype.element_ty), mask=rows[:, None] < R)


class MlaDecodeTmaBranch(MlaDecodeTma):
    """v5 with the softmax step under the runtime branch; v2's tiles."""

    KERNEL: ClassVar[str] = "mla_v6b_fused_kernel"

    def stages(self) -> list[Stage]:
        return [self.attention_stage(self._build, self.row_tiles(self.TILES), [self.KERNEL])]

    def _build(self, ws: Workspace, cfg: Config) -> Launch:
        grid = (triton.cdiv(self.rows, cfg["BLOCK_M"]), self.b)
        kernel, args = mla_v6b_fused_kernel[grid], self.kernel_args(cfg)
        rows = ws.kv.view(self.b * self.t, self.d + self.p)
        shape, strides = [self.b * self.t, self.d + self.p], [self.d + self.p, 1]
        values = TensorDescriptor(rows, shape, strides, [cfg["BLOCK_N"], self.d])
        keys_pe = TensorDescriptor(rows, shape, strides, [cfg["BLOCK_N"], self.p])
        return Launch(lambda: kernel(ws.q_nope, ws.q_pe, values, keys_pe, ws.out, **args), grid)


class MlaDecodeDispatchBranch(MlaDecodeDispatch):
    """v6's dispatch with the branch kernel on its fused path (v3's split-KV where the grid would not fill)."""

    def _tma(self) -> MlaDecodeTma:
        return MlaDecodeTmaBranch.model_validate(self.model_dump())


PLAN = MlaDecodeDispatchBranch
