"""mla_decode v7: the fused kernel in Gluon (triton.experimental.gluon), FlashMLA's division of the work: a CTA of
64 query rows on two warpgroups computes Q.K^T once (each warpgroup a half of the tile's cache rows: m64n32
wgmmas, warpsPerCTA [4, 2], which Triton's chained-dot rule never gives its scores, v5/v6: [8, 1], 1.53x the
FLOPs), writes the probabilities to shared memory, and each warpgroup multiplies them by its half of the D value
columns (m64n256 wgmmas) into its half of the 64 x 512 fp32 output, in registers.

Per cache tile: Q (in shared memory, loaded once by TMA) times the tile's keys, both from shared memory; tiles come
by TMA into two stages (mbarriers; Q 72 KB + 2 x 72 KB + P 8 KB of the 227 KB an SM gives). ``PV_FIRST`` (the
default): P.V of tile j is issued before the next tile's Q.K^T, whose load then has all of P.V's issue to land, and
the softmax waits for both. Off: FlashAttention-3's order, the next tile's Q.K^T first and its softmax while P.V
runs; with two stages that tile's load is issued only when the previous P.V is done, right before it is needed
(H100: warps stalled on that mbarrier wait).

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
def _softmax(sc, rows, c0, m, scale, s, t, H: gl.constexpr, BLOCK_N: gl.constexpr):  # type: ignore[no-untyped-def]
    """One tile's online-softmax step (base 2) on the scores ``sc`` [BLOCK_M, BLOCK_N] (fp32, wgmma layout): the
    mask (a row of token i sees cache rows <= t - s + i), the new running maximum, the factor that rescales what
    came before and the unnormalised probabilities."""
    LOG2E: gl.constexpr = 1.4426950408889634
    cols = c0 + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, sc.type.layout))
    seen = (cols[None, :] <= t - s + rows[:, None] // H) & (cols[None, :] < t)
    sc = gl.where(seen, sc * (scale * LOG2E), float("-inf"))
    m_new = gl.maximum(m, gl.max(sc, axis=1))
    m_safe = gl.where(m_new == float("-inf"), 0.0, m_new)
    alpha = gl.exp2(m - m_safe)
    prob = gl.exp2(sc - m_safe[:, None])
    return m_new, alpha, prob


@gluon.jit
def _load_tile(kv_desc, kpe_desc, bar, kv_buf, kpe_buf, row, pred):  # type: ignore[no-untyped-def]
    """Cache rows [row, row + BLOCK_N) into one stage by TMA: their D columns and their P rotary columns."""
    D: gl.constexpr = kv_desc.block_type.shape[1]
    mbarrier.expect(bar, kv_desc.block_type.nbytes + kpe_desc.block_type.nbytes, pred=pred)
    _tma_load(kv_desc, [row, 0], bar, kv_buf, pred=pred)
    _tma_load(kpe_desc, [row, D], bar, kpe_buf, pred=pred)


@gluon.jit
def _scores(q_s, qpe_s, kv_buf, kpe_buf, zero_s, is_async: gl.constexpr):  # type: ignore[no-untyped-def]
    """Q.K^T of one tile, fp32: the D columns' product, then the rotary columns' accumulated onto it."""
    sc = warpgroup_mma(q_s, kv_buf.permute((1, 0)), zero_s, use_acc=False, is_async=is_async)
    return warpgroup_mma(qpe_s, kpe_buf.permute((1, 0)), sc, is_async=is_async)


@gluon.jit
def _publish(p_s, prob):  # type: ignore[no-untyped-def]
    """The probabilities into shared memory for both warpgroups' P.V (every thread's stores done and visible to
    the tensor cores' reads)."""
    p_s.store(prob.to(p_s.dtype))
    fence_async_shared()
    _cta_barrier()


@gluon.jit
def mla_v7_kernel(q_desc, qpe_desc, kv_desc, kpe_desc, o_ptr, scale, s, t, R, H: gl.constexpr,  # type: ignore[no-untyped-def]
                  BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, PV_FIRST: gl.constexpr,
                  num_warps: gl.constexpr):  # fmt: skip
    D: gl.constexpr = kv_desc.block_type.shape[1]
    P: gl.constexpr = kpe_desc.block_type.shape[1]
    dtype: gl.constexpr = kv_desc.dtype
    gl.static_assert(num_warps == 8, "two warpgroups: one per half of the scores' columns and of the output's")
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 2],
                                                       instr_shape=[16, BLOCK_N // 2, 16])  # fmt: skip
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 2],
                                                       instr_shape=[16, D // 2, 16])  # fmt: skip
    o_rows_layout: gl.constexpr = gl.SliceLayout(1, o_layout)

    pid = gl.program_id(0)
    b = gl.program_id(1)
    row0 = b * R + pid * BLOCK_M  # rows past this sequence's R read the next one's queries: never stored
    n = gl.cdiv(t, BLOCK_N)

    q_s = gl.allocate_shared_memory(dtype, [BLOCK_M, D], q_desc.layout)
    qpe_s = gl.allocate_shared_memory(dtype, [BLOCK_M, P], qpe_desc.layout)
    kv_s = gl.allocate_shared_memory(dtype, [2, BLOCK_N, D], kv_desc.layout)
    kpe_s = gl.allocate_shared_memory(dtype, [2, BLOCK_N, P], kpe_desc.layout)
    p_s = gl.allocate_shared_memory(
        dtype, [BLOCK_M, BLOCK_N], gl.NVMMASharedLayout.get_default_for([BLOCK_M, BLOCK_N], dtype)
    )
    bars = gl.allocate_shared_memory(gl.int64, [3, 1], mbarrier.MBarrierLayout())  # Q, stage 0, stage 1
    for i in gl.static_range(3):
        mbarrier.init(bars.index(i), count=1)
    fence_async_shared()

    mbarrier.expect(bars.index(0), q_desc.block_type.nbytes + qpe_desc.block_type.nbytes)
    _tma_load(q_desc, [row0, 0], bars.index(0), q_s)
    _tma_load(qpe_desc, [row0, 0], bars.index(0), qpe_s)
    for i in gl.static_range(2):  # tiles 0 and 1 (a tile past the sequence's end reads rows the mask drops)
        _load_tile(kv_desc, kpe_desc, bars.index(1 + i), kv_s.index(i), kpe_s.index(i), b * t + i * BLOCK_N, i < n)

    rows = pid * BLOCK_M + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, s_layout))
    zero_s = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, s_layout)
    mbarrier.wait(bars.index(0), 0)
    mbarrier.wait(bars.index(1), 0)
    sc = _scores(q_s, qpe_s, kv_s.index(0), kpe_s.index(0), zero_s, False)
    m = gl.full([BLOCK_M], float("-inf"), gl.float32, gl.SliceLayout(1, s_layout))
    m, alpha, prob = _softmax(sc, rows, 0, m, scale, s, t, H, BLOCK_N)
    total = prob  # the running sums, per element: summed over the columns once, at the end
    _publish(p_s, prob)
    acc = gl.zeros([BLOCK_M, D], gl.float32, o_layout)

    for j in range(0, n - 1):
        cur = j % 2
        nxt = 1 - cur
        if PV_FIRST:  # P.V of tile j, then the next tile's scores: its load had all of P.V's issue to land
            acc = warpgroup_mma(p_s, kv_s.index(cur), acc, is_async=True)  # the values: the keys' D columns
            mbarrier.wait(bars.index(1 + nxt), ((j + 1) // 2) & 1)
            sc = _scores(q_s, qpe_s, kv_s.index(nxt), kpe_s.index(nxt), zero_s, True)
            acc = warpgroup_mma_wait(num_outstanding=2, deps=(acc,))
            _cta_barrier()  # both warpgroups' P.V of tile j done: its stage and P may be overwritten
            _load_tile(kv_desc, kpe_desc, bars.index(1 + cur), kv_s.index(cur), kpe_s.index(cur),
                       b * t + (j + 2) * BLOCK_N, j + 2 < n)  # fmt: skip
            sc = warpgroup_mma_wait(num_outstanding=0, deps=(sc,))
            m, alpha, prob = _softmax(sc, rows, (j + 1) * BLOCK_N, m, scale, s, t, H, BLOCK_N)
        else:  # the next tile's scores first, their softmax while P.V of tile j runs (FlashAttention-3's overlap)
            mbarrier.wait(bars.index(1 + nxt), ((j + 1) // 2) & 1)
            sc = _scores(q_s, qpe_s, kv_s.index(nxt), kpe_s.index(nxt), zero_s, True)
            acc = warpgroup_mma(p_s, kv_s.index(cur), acc, is_async=True)
            sc = warpgroup_mma_wait(num_outstanding=1, deps=(sc,))
            m, alpha, prob = _softmax(sc, rows, (j + 1) * BLOCK_N, m, scale, s, t, H, BLOCK_N)
            acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
            _cta_barrier()
            _load_tile(kv_desc, kpe_desc, bars.index(1 + cur), kv_s.index(cur), kpe_s.index(cur),
                       b * t + (j + 2) * BLOCK_N, j + 2 < n)  # fmt: skip
        total = total * alpha[:, None] + prob
        acc = acc * gl.convert_layout(alpha, o_rows_layout)[:, None]
        _publish(p_s, prob)

    acc = warpgroup_mma(p_s, kv_s.index((n - 1) % 2), acc)
    for i in gl.static_range(3):
        mbarrier.invalidate(bars.index(i))
    out = acc / gl.convert_layout(gl.sum(total, axis=1), o_rows_layout)[:, None]
    o_rows = pid * BLOCK_M + gl.arange(0, BLOCK_M, layout=o_rows_layout)
    dd = gl.arange(0, D, layout=gl.SliceLayout(0, o_layout))
    gl.store(o_ptr + (b * R + o_rows[:, None]) * D + dd[None, :], out.to(o_ptr.dtype.element_ty),
             mask=o_rows[:, None] < R)  # fmt: skip


class MlaDecodeGluon(MlaDecodeDispatch):
    """v6's dispatch with the fused path in Gluon (16-bit types; float32 keeps v5's Triton kernel)."""

    # b x row blocks at least FUSED_FILL of 132 SMs: the check runs (on a GPU) or compiles (on a CPU) the Gluon kernel;
    # t=70 ends inside a tile, and h=4 puts 12 rows of 3 tokens in a 64-row block (the rest masked)
    check_params: ClassVar[dict[str, Any]] = {**MlaDecodeDispatch.check_params, "b": 100, "t": 70}
    GLUON_TILES: ClassVar[list[Config]] = [{"BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 8, "PV_FIRST": True}]

    def gluon(self) -> bool:
        """Whether the Gluon kernel takes the fused path: 16-bit elements, D 32..512 (each warpgroup's half of the
        output at most one m64n256 wgmma wide) and P at least 16 (one wgmma K step)."""
        return self.dtype != "float32" and 32 <= self.d <= 512 and self.p >= 16

    def stages(self) -> list[Stage]:
        if not (self.fused() and self.gluon()):
            return super().stages()
        return [self.attention_stage(self._fused, self.GLUON_TILES, ["mla_v7_kernel"])]

    def descriptor(self, base: Any, block: list[int]) -> Any:
        """A TMA descriptor over a 2-D view, its tile ``block`` in the NVMMA shared layout Gluon's copies land in."""
        from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

        el = gl.bfloat16 if self.dtype == "bfloat16" else gl.float16
        layout = gl.NVMMASharedLayout.get_default_for(block, el)
        return TensorDescriptor(base, list(base.shape), list(base.stride()), block, layout)

    def tiles(self, ws: SplitWorkspace, block_n: int) -> tuple[Any, Any]:
        """The cache's descriptors: each tile's D latent columns (keys, then values) and its P rotary columns."""
        kv = ws.kv.view(self.b * self.t, self.d + self.p)
        return self.descriptor(kv, [block_n, self.d]), self.descriptor(kv, [block_n, self.p])

    def _fused(self, ws: SplitWorkspace, cfg: Config) -> Launch:
        if not self.gluon():
            return super()._fused(ws, cfg)
        m, bn, d, p = cfg["BLOCK_M"], cfg["BLOCK_N"], self.d, self.p
        q_desc = self.descriptor(ws.q_nope.view(self.b * self.rows, d), [m, d])
        qpe_desc = self.descriptor(ws.q_pe.view(self.b * self.rows, p), [m, p])
        kv_desc, kpe_desc = self.tiles(ws, bn)
        grid = (triton.cdiv(self.rows, m), self.b)
        kernel = mla_v7_kernel[grid]
        args = {"H": self.h, "BLOCK_M": m, "BLOCK_N": bn, "PV_FIRST": cfg["PV_FIRST"], "num_warps": cfg["num_warps"]}
        shape = (self.scale, self.s, self.t, self.rows)
        return Launch(lambda: kernel(q_desc, qpe_desc, kv_desc, kpe_desc, ws.out, *shape, **args), grid)


PLAN = MlaDecodeGluon
