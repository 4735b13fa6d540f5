"""mla_decode v4: v2's fused flash-decoding with the scores computed once per CTA. In v2 both warpgroups of a
64-row block compute the whole Q.K^T tile (Triton gives a dot that feeds another dot all its warps along M, and
M = 64 is one warpgroup's wgmma), then split P.V's 512 columns: 1.53x the model's tensor FLOPs (ncu). Here the
warpgroups split the scores' columns and pass the probabilities to each other through a per-CTA scratch buffer
(store, CTA barrier, load): the dot that makes the scores no longer feeds a dot, so Triton splits it. Kept as the
measured step of following that advice (docs/kernels/mla_decode.md): the barrier in the loop stops Triton's
software pipelining, and the round trip through L2 costs more than the repeated work did."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import triton
import triton.language as tl

from kbench.plan.base import Config, Launch, Precision, Stage

from ._common import MlaDecode, Workspace
from ._triton import queries, softmax_step, visible


@dataclass
class ScratchWorkspace(Workspace):
    probs: Any  # [CTAs, 2, BLOCK_M, BLOCK_N] in the element type: each CTA's probabilities, two slots
    alpha: Any  # [CTAs, 2, BLOCK_M] fp32: each CTA's rescale factors of the running output


@triton.jit
def through_ptx(p_ptrs, a_ptrs, prob, alpha):  # type: ignore[no-untyped-def]
    """The exchange in inline PTX (fp32 scratch): stores, a CTA barrier, loads. Triton's pipeliner then still copies
    the cache tiles asynchronously and cannot prefetch P before it is written; not run by the CPU interpreter
    (scripts/mla-decode-variants.py times it)."""
    tl.inline_asm_elementwise("st.global.b32 [$1], $2;\n\tmov.b32 $0, 0;", "=r,l,r",
                              [p_ptrs.to(tl.int64, bitcast=True), prob.to(tl.int32, bitcast=True)], dtype=tl.int32,
                              is_pure=False, pack=1)  # fmt: skip
    tl.inline_asm_elementwise("st.global.b32 [$1], $2;\n\tmov.b32 $0, 0;", "=r,l,r",
                              [a_ptrs.to(tl.int64, bitcast=True), alpha.to(tl.int32, bitcast=True)], dtype=tl.int32,
                              is_pure=False, pack=1)  # fmt: skip
    tl.inline_asm_elementwise("bar.sync 1, 256;\n\tmov.b32 $0, 0;", "=r,r", [tl.arange(0, 256)], dtype=tl.int32,
                              is_pure=False, pack=1)  # fmt: skip
    shared = tl.inline_asm_elementwise("ld.global.f32 $0, [$1];", "=f,l", [p_ptrs], dtype=tl.float32, is_pure=False,
                                       pack=1)  # fmt: skip
    rescale = tl.inline_asm_elementwise("ld.global.f32 $0, [$1];", "=f,l", [a_ptrs], dtype=tl.float32, is_pure=False,
                                        pack=1)  # fmt: skip
    return shared, rescale


@triton.jit
def mla_v4_fused_kernel(q_nope_ptr, q_pe_ptr, kv_ptr, o_ptr, p_ptr, a_ptr, scale, s, t, R, H: tl.constexpr,  # type: ignore[no-untyped-def]
                        D: tl.constexpr, P: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                        PTX: tl.constexpr = False):  # fmt: skip
    """PTX: the exchange through inline PTX (``through_ptx``, 8 warps, an fp32 scratch buffer); else tl.store,
    tl.debug_barrier, tl.load (the shipped version: the barrier stops Triton's software pipelining)."""
    LOG2E: tl.constexpr = 1.4426950408889634
    pid = tl.program_id(0)
    b = tl.program_id(1)
    rows = pid * BLOCK_M + tl.arange(0, BLOCK_M)
    rmask = rows < R
    dd = tl.arange(0, D)
    pp = tl.arange(0, P)
    rm = tl.arange(0, BLOCK_M)
    cn = tl.arange(0, BLOCK_N)
    qn, qp = queries(q_nope_ptr, q_pe_ptr, b, rows, R, D, P)
    m = tl.full((BLOCK_M,), float("-inf"), tl.float32)
    total = tl.zeros((BLOCK_M,), tl.float32)
    acc = tl.zeros((BLOCK_M, D), tl.float32)
    cta = b * tl.num_programs(0) + pid
    p_base = p_ptr + cta * 2 * BLOCK_M * BLOCK_N
    a_base = a_ptr + cta * 2 * BLOCK_M
    c = scale * LOG2E
    for c0 in range(0, t, BLOCK_N):
        cols = c0 + cn
        cmask = cols < t
        tile = kv_ptr + (b * t + cols[:, None]) * (D + P)
        v = tl.load(tile + dd[None, :], mask=cmask[:, None], other=0.0)  # [BLOCK_N, D]: keys, then values
        kp = tl.load(tile + D + pp[None, :], mask=cmask[:, None], other=0.0)
        # two scaled products summed (not one dot accumulating into the other): no dot feeds a dot here
        sc = tl.dot(qn, tl.trans(v)) * c + tl.dot(qp, tl.trans(kp)) * c
        sc = tl.where(visible(rows, cols, s, t, H) & cmask[None, :], sc, float("-inf"))
        m, alpha, prob, total = softmax_step(sc, m, total)
        slot = (c0 // BLOCK_N) % 2  # two slots: one barrier an iteration keeps a slow warp's reads apart from writes
        p_ptrs = p_base + slot * BLOCK_M * BLOCK_N + rm[:, None] * BLOCK_N + cn[None, :]
        a_ptrs = a_base + slot * BLOCK_M + rm
        if PTX:
            shared, rescale = through_ptx(p_ptrs, a_ptrs, prob, alpha)
        else:
            tl.store(p_ptrs, prob.to(p_ptr.dtype.element_ty))
            tl.store(a_ptrs, alpha)
            tl.debug_barrier()
            shared = tl.load(p_ptrs)
            rescale = tl.load(a_ptrs)
        acc = acc * rescale[:, None] + tl.dot(shared.to(v.dtype), v)
    out = acc / total[:, None]
    tl.store(o_ptr + (b * R + rows[:, None]) * D + dd[None, :], out.to(o_ptr.dtype.element_ty), mask=rmask[:, None])


class MlaDecodeSharedScores(MlaDecode):
    """v2 with the scores computed once per CTA, the probabilities passed between warpgroups through a scratch
    buffer."""

    POW2_WIDTHS: ClassVar[bool] = True
    FP32_AS: ClassVar[Precision] = "tf32"
    # v2's fastest tile at b=32 s=16 t=4096 (two warpgroups: the case the repeated scores come from)
    TILES: ClassVar[list[Config]] = [{"BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 8, "num_stages": 2}]

    def stages(self) -> list[Stage]:
        return [self.attention_stage(self._build, self.TILES, ["mla_v4_fused_kernel"])]

    def setup(self, device: str, seed: int) -> ScratchWorkspace:
        import torch

        ws = super().setup(device, seed)
        tile = self.TILES[0]
        ctas = triton.cdiv(self.rows, tile["BLOCK_M"]) * self.b
        return ScratchWorkspace(
            **vars(ws),
            probs=torch.empty(ctas * 2 * tile["BLOCK_M"] * tile["BLOCK_N"], device=device, dtype=self.torch_dtype()),
            alpha=torch.empty(ctas * 2 * tile["BLOCK_M"], device=device, dtype=torch.float32),
        )

    def _build(self, ws: ScratchWorkspace, cfg: Config) -> Launch:
        grid = (triton.cdiv(self.rows, cfg["BLOCK_M"]), self.b)
        kernel, args = mla_v4_fused_kernel[grid], self.kernel_args(cfg)
        return Launch(lambda: kernel(ws.q_nope, ws.q_pe, ws.kv, ws.out, ws.probs, ws.alpha, **args), grid)


PLAN = MlaDecodeSharedScores
