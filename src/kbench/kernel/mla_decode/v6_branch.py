"""mla_decode v6_branch: v6 with its fused kernel's softmax step under a runtime branch that is always taken (issue
44). v5/v6's 64-row block needs two warpgroups for its 64 x 512 fp32 accumulator, and Triton gives a dot that
feeds another dot to all warps along M: both warpgroups compute the whole Q.K^T (1.53x the model's tensor FLOPs,
kbench's "Work repeated by warpgroups"). A user rewriting vLLM's kernel reported that computing P and the rescale
factor under such a branch let Triton split the scores over both warpgroups (226.1 us against v6's 246.9 at
b=32 s=16 t=4096 h=16 on the H100). Measured here (H100, Triton 3.6, 2026-11-27): the branch alone keeps the scores
over warpsPerCTA [8, 1] (still 1.47x) and, on its fastest tile (64 x 32, 3 stages), runs in 443.6 us against v6's
247.8: slower, kept as the step the devlog (docs/kernels/mla_decode.md) records and kbench's items follow."""

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
    # v2's tiles and a 128-column one (one stage: 144 KB of shared memory): split over the two warpgroups, a 32- or
    # 64-column scores tile became m64n16/n32 wgmmas (kbench's Top 1 on the first run: narrow tensor tiles)
    TILES: ClassVar[list[Config]] = [
        *MlaDecodeTma.TILES,
        {"BLOCK_M": 64, "BLOCK_N": 128, "num_warps": 8, "num_stages": 1},
    ]

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
