"""mla_decode v7: the fused kernel in Gluon (triton.experimental.gluon), FlashMLA's division of the work: a CTA of
64 query rows on two warpgroups computes Q.K^T once (each warpgroup a half of the tile's cache rows: m64n32
wgmmas, warpsPerCTA [4, 2], which Triton's chained-dot rule never gives its scores, v5/v6: [8, 1], 1.53x the
FLOPs), writes the probabilities to shared memory, and each warpgroup multiplies them by its half of the D value
columns (m64n256 wgmmas) into its half of the 64 x 512 fp32 output, in registers.

Per cache tile: Q (in shared memory, loaded once by TMA) times the tile's keys, both from shared memory; the next
tile's Q.K^T is issued before this tile's P.V and waited for first, so the softmax of tile j+1 runs while the
tensor cores work on P.V of tile j (FlashAttention-3's in-warpgroup overlap); tiles come by TMA two ahead
(mbarriers, two stages: Q 72 KB + 2 x 72 KB + P 8 KB of the 227 KB). ``LAZY``: 0, the running maximum is the exact
one; 1, it moves only when a row's maximum grew by more than 8 (2^8 in the probabilities: FlashAttention-4's rule,
exact because the sums use the same stale maximum); 2, as 1, and the running output's rescale is skipped in the
iterations where no row's maximum moved.

Where the fused kernel would not fill the GPU (plain decode) and for float32, v6's dispatch and kernels run as
they were."""

from __future__ import annotations

from typing import Any, ClassVar

import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_wait,
)

from kbench.plan.base import Config, Launch, Stage

from .v3 import SplitWorkspace
from .v6 import MlaDecodeDispatch

# TMA's global-to-shared copy: async_load from Triton 3.7 on (3.9's CI), async_copy_global_to_shared in 3.6 (the H100)
_tma_load = getattr(tma, "async_load", None) or tma.async_copy_global_to_shared
_cta_barrier = getattr(gl, "barrier", None) or gl.thread_barrier  # the CTA's bar.sync: 3.9's name, 3.6's


@gluon.jit
def _softmax(sc, rows, c0, m, scale, s, t, H: gl.constexpr, BLOCK_N: gl.constexpr, LAZY: gl.constexpr):  # type: ignore[no-untyped-def]
    """One tile's online-softmax step (base 2) on the scores ``sc`` [BLOCK_M, BLOCK_N] (fp32, wgmma layout): the
    mask (a row of token i sees cache rows <= t - s + i), the new running maximum, the factor that rescales what
    came before and the unnormalised probabilities."""
    LOG2E: gl.constexpr = 1.4426950408889634
    cols = c0 + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, sc.type.layout))
    seen = (cols[None, :] <= t - s + rows[:, None] // H) & (cols[None, :] < t)
    sc = gl.where(seen, sc * (scale * LOG2E), float("-inf"))
    m_new = gl.maximum(m, gl.max(sc, axis=1))
    if LAZY > 0:  # keep the old maximum unless it grew by more than 8 (2^8 in the probabilities: safe in fp32 and bf16)
        m_new = gl.where(m_new - m > 8.0, m_new, m)
    m_safe = gl.where(m_new == float("-inf"), 0.0, m_new)
    alpha = gl.exp2(m - m_safe)
    prob = gl.exp2(sc - m_safe[:, None])
    return m_new, alpha, prob


@gluon.jit
def mla_v7_kernel(q_desc, qpe_desc, kv_desc, kpe_desc, o_ptr, scale, s, t, R, H: gl.constexpr,  # type: ignore[no-untyped-def]
                  BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, LAZY: gl.constexpr,
                  num_warps: gl.constexpr):  # fmt: skip
    D: gl.constexpr = kv_desc.block_type.shape[1]
    P: gl.constexpr = kpe_desc.block_type.shape[1]
    dtype: gl.constexpr = kv_desc.dtype
    gl.static_assert(num_warps == 8, "two warpgroups: one per half of the scores' columns and of the output's")
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 2],
                                                       instr_shape=[16, BLOCK_N // 2, 16])  # fmt: skip
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 2],
                                                       instr_shape=[16, D // 2, 16])  # fmt: skip
    p_smem: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_M, BLOCK_N], dtype)

    pid = gl.program_id(0)
    b = gl.program_id(1)
    row0 = b * R + pid * BLOCK_M  # rows past this sequence's R read the next one's queries: never stored
    n = gl.cdiv(t, BLOCK_N)

    q_s = gl.allocate_shared_memory(dtype, [BLOCK_M, D], q_desc.layout)
    qpe_s = gl.allocate_shared_memory(dtype, [BLOCK_M, P], qpe_desc.layout)
    kv_s = gl.allocate_shared_memory(dtype, [2, BLOCK_N, D], kv_desc.layout)
    kpe_s = gl.allocate_shared_memory(dtype, [2, BLOCK_N, P], kpe_desc.layout)
    p_s = gl.allocate_shared_memory(dtype, [BLOCK_M, BLOCK_N], p_smem)
    bars = gl.allocate_shared_memory(gl.int64, [3, 1], mbarrier.MBarrierLayout())  # Q, stage 0, stage 1
    for i in gl.static_range(3):
        mbarrier.init(bars.index(i), count=1)
    fence_async_shared()

    tile_bytes: gl.constexpr = BLOCK_N * (D + P) * dtype.primitive_bitwidth // 8
    mbarrier.expect(bars.index(0), BLOCK_M * (D + P) * dtype.primitive_bitwidth // 8)
    _tma_load(q_desc, [row0, 0], bars.index(0), q_s)
    _tma_load(qpe_desc, [row0, 0], bars.index(0), qpe_s)
    for i in gl.static_range(2):  # tiles 0 and 1 (a tile past the sequence's end reads rows the mask drops)
        mbarrier.expect(bars.index(1 + i), tile_bytes, pred=i < n)
        _tma_load(kv_desc, [b * t + i * BLOCK_N, 0], bars.index(1 + i), kv_s.index(i),
                                        pred=i < n)  # fmt: skip
        _tma_load(kpe_desc, [b * t + i * BLOCK_N, D], bars.index(1 + i), kpe_s.index(i),
                                        pred=i < n)  # fmt: skip

    rows = pid * BLOCK_M + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, s_layout))
    zero_s = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, s_layout)
    mbarrier.wait(bars.index(0), 0)
    mbarrier.wait(bars.index(1), 0)
    sc = warpgroup_mma(q_s, kv_s.index(0).permute((1, 0)), zero_s, use_acc=False)
    sc = warpgroup_mma(qpe_s, kpe_s.index(0).permute((1, 0)), sc)
    m = gl.full([BLOCK_M], float("-inf"), gl.float32, gl.SliceLayout(1, s_layout))
    m, alpha, prob = _softmax(sc, rows, 0, m, scale, s, t, H, BLOCK_N, LAZY)
    total = prob  # the running sums, per element: summed over the columns once, at the end
    p_s.store(prob.to(dtype))
    fence_async_shared()
    _cta_barrier()
    acc = gl.zeros([BLOCK_M, D], gl.float32, o_layout)

    for j in range(0, n - 1):
        cur = j % 2
        nxt = 1 - cur
        mbarrier.wait(bars.index(1 + nxt), ((j + 1) // 2) & 1)
        sc = warpgroup_mma(q_s, kv_s.index(nxt).permute((1, 0)), zero_s, use_acc=False, is_async=True)
        sc = warpgroup_mma(qpe_s, kpe_s.index(nxt).permute((1, 0)), sc, is_async=True)
        acc = warpgroup_mma(p_s, kv_s.index(cur), acc, is_async=True)  # P.V of tile j, its values: the keys' D
        sc = warpgroup_mma_wait(num_outstanding=1, deps=(sc,))
        m, alpha, prob = _softmax(sc, rows, (j + 1) * BLOCK_N, m, scale, s, t, H, BLOCK_N, LAZY)  # with P.V
        total = total * alpha[:, None] + prob
        acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
        _cta_barrier()  # both warpgroups' P.V of tile j done: its stage and P may be overwritten
        more = j + 2 < n
        mbarrier.expect(bars.index(1 + cur), tile_bytes, pred=more)
        _tma_load(kv_desc, [b * t + (j + 2) * BLOCK_N, 0], bars.index(1 + cur),
                                        kv_s.index(cur), pred=more)  # fmt: skip
        _tma_load(kpe_desc, [b * t + (j + 2) * BLOCK_N, D], bars.index(1 + cur),
                                        kpe_s.index(cur), pred=more)  # fmt: skip
        if LAZY == 2:  # skip the rescale where no row's maximum moved (a CTA-uniform test: one reduction)
            if gl.max(gl.where(alpha < 1.0, 1, 0), axis=0) > 0:
                acc = acc * gl.convert_layout(alpha, gl.SliceLayout(1, o_layout))[:, None]
        else:
            acc = acc * gl.convert_layout(alpha, gl.SliceLayout(1, o_layout))[:, None]
        p_s.store(prob.to(dtype))
        fence_async_shared()
        _cta_barrier()

    acc = warpgroup_mma(p_s, kv_s.index((n - 1) % 2), acc)
    for i in gl.static_range(3):
        mbarrier.invalidate(bars.index(i))
    norm = gl.convert_layout(gl.sum(total, axis=1), gl.SliceLayout(1, o_layout))
    out = acc / norm[:, None]
    o_rows = pid * BLOCK_M + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, o_layout))
    dd = gl.arange(0, D, layout=gl.SliceLayout(0, o_layout))
    gl.store(o_ptr + (b * R + o_rows[:, None]) * D + dd[None, :], out.to(o_ptr.dtype.element_ty),
             mask=o_rows[:, None] < R)  # fmt: skip


class MlaDecodeGluon(MlaDecodeDispatch):
    """v6's dispatch with the fused path in Gluon (16-bit types; float32 keeps v5's Triton kernel)."""

    # b x row blocks at least FUSED_FILL of 132 SMs: the check runs (on a GPU) or compiles (on a CPU) the Gluon kernel;
    # t=70 ends inside a tile, and h=4 puts 12 rows of 3 tokens in a 64-row block (the rest masked)
    check_params: ClassVar[dict[str, Any]] = {**MlaDecodeDispatch.check_params, "b": 100, "t": 70}
    GLUON_TILES: ClassVar[list[Config]] = [{"BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 8, "LAZY": 0}]

    def gluon(self) -> bool:
        """Whether the Gluon kernel takes the fused path: 16-bit elements, D 32..512 (each warpgroup's half of the
        output at most one m64n256 wgmma wide) and P at least 16 (one wgmma K step)."""
        return self.dtype != "float32" and 32 <= self.d <= 512 and self.p >= 16

    def stages(self) -> list[Stage]:
        if not (self.fused() and self.gluon()):
            return super().stages()
        return [self.attention_stage(self._fused, self.GLUON_TILES, ["mla_v7_kernel"])]

    def _fused(self, ws: SplitWorkspace, cfg: Config) -> Launch:
        if not self.gluon():
            return super()._fused(ws, cfg)
        from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

        m, bn, d, p = cfg["BLOCK_M"], cfg["BLOCK_N"], self.d, self.p
        el = gl.bfloat16 if self.dtype == "bfloat16" else gl.float16

        def desc(base: Any, block: list[int]) -> Any:
            layout = gl.NVMMASharedLayout.get_default_for(block, el)
            return TensorDescriptor(base, list(base.shape), list(base.stride()), block, layout)

        kv = ws.kv.view(self.b * self.t, d + p)
        q_desc = desc(ws.q_nope.view(self.b * self.rows, d), [m, d])
        qpe_desc = desc(ws.q_pe.view(self.b * self.rows, p), [m, p])
        kv_desc, kpe_desc = desc(kv, [bn, d]), desc(kv, [bn, p])
        grid = (triton.cdiv(self.rows, m), self.b)
        kernel = mla_v7_kernel[grid]
        args = {"H": self.h, "BLOCK_M": m, "BLOCK_N": bn, "LAZY": cfg["LAZY"], "num_warps": cfg["num_warps"]}
        shape = (self.scale, self.s, self.t, self.rows)
        return Launch(lambda: kernel(q_desc, qpe_desc, kv_desc, kpe_desc, ws.out, *shape, **args), grid)


PLAN = MlaDecodeGluon
