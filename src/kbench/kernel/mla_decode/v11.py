"""mla_decode v11: v9's work items with FlashMLA's "seesaw" schedule inside each CTA (its write-up, 2025-04-22).

v7/v9's two warpgroups split each score tile's columns: m64n32 Q.K^T wgmmas, each warpgroup reading all of Q from
shared memory for half a tile's product (kbench's Top 1 on v7: narrow tensor tiles, 21 FLOP per shared-memory byte
where 32 are needed), and the softmax runs while the tensor cores wait. Here the warpgroups take alternate cache
tiles: the first computes the whole m64n64 score tile of each even tile (stage 0), the second of each odd tile (stage
1), so Q is read once per tile. The 64 x 512 output stays split by columns (each warpgroup its 256, in registers), so
each warpgroup multiplies both tiles' probabilities by its half of the values:

- warpgroup 0: S0 = Q.K0^T; m0 = max(m, rowmax S0); P0 = exp(S0 - m0); P0 and (m0, a0 = exp(m - m0)) published;
  O_L = O_L a0 + P0.V0_L (P0 from registers); then, once warpgroup 1 published, O_L = O_L a1 + P1.V1_L (P1 from
  shared memory).
- warpgroup 1: S1 = Q.K1^T; once P0 is published, O_R = O_R a0 + P0.V0_R while it computes m1 = max(m0, rowmax S1),
  P1 = exp(S1 - m1), a1 = exp(m0 - m1), and publishes them; O_R = O_R a1 + P1.V1_R.

One warpgroup's softmax runs while the other's MMAs do. ``STAGGER``: warpgroup 1 issues S1 once S0 is done (S1 then
runs during warpgroup 0's softmax, not beside S0). ``EARLY_Y``: warpgroup 1 issues P0.V0_R before waiting for the
scores of its own tile, so that stage 0 is released whether or not tile 2i + 1 has landed. The probabilities are
published into the stage's rotary columns (a 64 x 64 tile, free once that stage's Q.K^T is done), so the shared
memory is Q and two stages (216 KB). A third partition, one warp, copies each stage in two pieces, each as soon as
its last reader released it: the first 256 value columns (read last by warpgroup 0's P.V) and the other 256 (read
last by warpgroup 1's), the rotary columns with whichever piece holds the stage's published probabilities' reader.
Each warpgroup sums its own tiles' probabilities (rescaled by both factors); the two sums are added once, at the end.
A chunk with an odd number of tiles leaves the second warpgroup's last tile out.

Registers (Triton 3.6's ptxas on the H100): the second warpgroup at 232 registers and warpgroup 0's Q.K^T as one
product over the 512 value columns compile without spills. With 240 and that product in two halves, 280 bytes a
thread spilled (ncu: 120 MB of local traffic at the compute-bound point) and the kernel took 172 us against 146."""

from __future__ import annotations

from typing import Any, ClassVar

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    warpgroup_mma,
    warpgroup_mma_wait,
)

from kbench.plan.base import Config

from ._coop_merge import _cooperate
from .v7 import _cta_barrier, _softmax, _tma_load
from .v9 import MlaDecodeServe, _chunk_weights, _last_to_arrive, _operands, _tile_row, _work_item

# the mbarriers: Q landed; each stage's two pieces landed (X: its first 256 value columns, with the rotary columns in
# stage 1; Y: the other 256, with the rotary columns in stage 0) and released (X by the first warpgroup, Y by the
# second: each piece's last reader); the first warpgroup's scores done (STAGGER), its P0 and factors published, the
# second's P1; each warpgroup's row sums written, at the end (2)
Q_FULL = gl.constexpr(0)
FULL_X = gl.constexpr(1)  # + stage
FULL_Y = gl.constexpr(3)
EMPTY_X = gl.constexpr(5)
EMPTY_Y = gl.constexpr(7)
S0_DONE = gl.constexpr(9)
P0_READY = gl.constexpr(10)
P1_READY = gl.constexpr(11)
L_READY = gl.constexpr(12)  # + warpgroup
STORED = gl.constexpr(14)  # MERGE (v12): warpgroup 1's half of a split chunk's partial stored
BARRIERS = gl.constexpr(16)
# the rows of the exchange buffer (8 x BLOCK_M fp32): m0, a0 (first warpgroup), m1, a1 (second), the two row sums
X_M0 = gl.constexpr(0)
X_A0 = gl.constexpr(1)
X_M1 = gl.constexpr(2)
X_A1 = gl.constexpr(3)
X_L = gl.constexpr(4)


@gluon.jit
def _load_piece(kv_desc, kpe_desc, bar, kv_buf, kpe_buf, row, c, ROPE: gl.constexpr):  # type: ignore[no-untyped-def]
    """Half of a tile's value columns (from column c), and its rotary columns where ROPE, into one stage by TMA."""
    if ROPE:
        mbarrier.expect(bar, kv_desc.block_type.nbytes + kpe_desc.block_type.nbytes)
        _tma_load(kpe_desc, [row, 2 * kv_desc.block_type.shape[1]], bar, kpe_buf)
    else:
        mbarrier.expect(bar, kv_desc.block_type.nbytes)
    _tma_load(kv_desc, [row, c], bar, kv_buf)


@gluon.jit
def _v11_loader(q_desc, qpe_desc, kv_desc, kpe_desc, q_s, qpe_s, kv_s, kpe_s, bars, table_ptr, seq, j0, n, t, row0,  # type: ignore[no-untyped-def]
                MAX_PAGES, PAGE: gl.constexpr, BLOCK_N: gl.constexpr):  # fmt: skip
    """The copying partition: Q once, then the chunk's tiles 2u and 2u + 1 into stages 0 and 1, each piece as soon
    as its last reader released the piece of tile 2u - 2 or 2u - 1, in the order the products read them."""
    DH: gl.constexpr = kv_desc.block_type.shape[1]
    mbarrier.expect(bars.index(Q_FULL), q_desc.block_type.nbytes + qpe_desc.block_type.nbytes)
    _tma_load(q_desc, [row0, 0], bars.index(Q_FULL), q_s)
    _tma_load(qpe_desc, [row0, 0], bars.index(Q_FULL), qpe_s)
    for u in range(0, (n + 1) // 2):
        ph = (u + 1) & 1
        r = _tile_row(table_ptr, seq, j0 + 2 * u, t, MAX_PAGES, PAGE, BLOCK_N, True)
        mbarrier.wait(bars.index(EMPTY_X), ph, pred=u > 0)
        _load_piece(kv_desc, kpe_desc, bars.index(FULL_X), kv_s.index(0).slice(0, DH, dim=1), kpe_s.index(0), r, 0,
                    False)  # fmt: skip
        mbarrier.wait(bars.index(EMPTY_Y), ph, pred=u > 0)
        _load_piece(kv_desc, kpe_desc, bars.index(FULL_Y), kv_s.index(0).slice(DH, DH, dim=1), kpe_s.index(0), r, DH,
                    True)  # fmt: skip
        if 2 * u + 1 < n:
            r = _tile_row(table_ptr, seq, j0 + 2 * u + 1, t, MAX_PAGES, PAGE, BLOCK_N, True)
            mbarrier.wait(bars.index(EMPTY_X + 1), ph, pred=u > 0)
            _load_piece(kv_desc, kpe_desc, bars.index(FULL_X + 1), kv_s.index(1).slice(0, DH, dim=1), kpe_s.index(1),
                        r, 0, True)  # fmt: skip
            mbarrier.wait(bars.index(EMPTY_Y + 1), ph, pred=u > 0)
            _load_piece(kv_desc, kpe_desc, bars.index(FULL_Y + 1), kv_s.index(1).slice(DH, DH, dim=1),
                        kpe_s.index(1), r, DH, False)  # fmt: skip


@gluon.jit
def _row(x_s, X):  # type: ignore[no-untyped-def]
    """Row X of the exchange buffer (one value per query row)."""
    M: gl.constexpr = x_s.shape[0] // 8
    return x_s.slice(X * M, M)


@gluon.jit
def _publish_half(kpe_buf, x_s, bars, prob, m, a, X: gl.constexpr, READY: gl.constexpr):  # type: ignore[no-untyped-def]
    """A warpgroup's probabilities over its stage's rotary columns, its running maximum and factor into the exchange
    rows X, X + 1, visible to the other warpgroup's loads and wgmmas."""
    kpe_buf.store(prob)
    _row(x_s, X).store(m)
    _row(x_s, X + 1).store(a)
    fence_async_shared()
    mbarrier.arrive(bars.index(READY))


@gluon.jit
def _merge_pair(part_ptr, lse_ptr, o_ptr, seq, pid, first, R, D: gl.constexpr, BLOCK_M: gl.constexpr,  # type: ignore[no-untyped-def]
                num_warps: gl.constexpr):  # fmt: skip
    """One row block of a sequence split in two chunks (v12): their partials merged by their log-sum-exps into the
    output, 64 columns at a time in a loop (v9's merge, unrolled over any number of chunks, spilled here), read past
    L1 (another SM wrote one of them)."""
    layout: gl.constexpr = gl.BlockedLayout([1, 4], [4, 8], [num_warps, 1], [1, 0])
    rows = pid * BLOCK_M + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, layout))
    rmask = rows < R
    l0 = gl.load(lse_ptr + first * R + rows, mask=rmask, other=float("-inf"), cache_modifier=".cg")
    l1 = gl.load(lse_ptr + (first + 1) * R + rows, mask=rmask, other=float("-inf"), cache_modifier=".cg")
    top = gl.maximum(l0, l1)
    top = gl.where(top == float("-inf"), 0.0, top)
    w0 = gl.exp2(l0 - top)
    w1 = gl.exp2(l1 - top)
    inv = 1.0 / gl.where(w0 + w1 > 0, w0 + w1, 1.0)
    w0 = w0 * inv
    w1 = w1 * inv
    for c0 in range(0, D, 64):
        cols = c0 + gl.arange(0, 64, layout=gl.SliceLayout(0, layout))
        at = rows[:, None] * D + cols[None, :]
        p0 = gl.load(part_ptr + first * R * D + at, mask=rmask[:, None], other=0.0, cache_modifier=".cg")
        p1 = gl.load(part_ptr + (first + 1) * R * D + at, mask=rmask[:, None], other=0.0, cache_modifier=".cg")
        p0 = p0.to(gl.float32)  # v13's partials are in the output's type
        p1 = p1.to(gl.float32)
        out = w0[:, None] * p0 + w1[:, None] * p1
        gl.store(o_ptr + seq * R * D + at, out.to(o_ptr.dtype.element_ty), mask=rmask[:, None])


@gluon.jit
def _merge_loop(part_ptr, lse_ptr, o_ptr, seq, pid, first, count, R, D: gl.constexpr, BLOCK_M: gl.constexpr,  # type: ignore[no-untyped-def]
                num_warps: gl.constexpr):  # fmt: skip
    """One row block of a sequence split in ``count`` chunks (v15): their partials merged by their log-sum-exps,
    64 columns at a time, the chunks in a loop inside it (v9's merge unrolls the columns: it spilled here), two
    chunks' loads in flight per step, read past L1 (other SMs wrote them)."""
    layout: gl.constexpr = gl.BlockedLayout([1, 4], [4, 8], [num_warps, 1], [1, 0])
    rows = pid * BLOCK_M + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, layout))
    rmask = rows < R
    top, inv = _chunk_weights(lse_ptr, first, count, R, rows, rmask, BLOCK_M, gl.SliceLayout(1, layout))
    for c0 in range(0, D, 64):
        cols = c0 + gl.arange(0, 64, layout=gl.SliceLayout(0, layout))
        at = rows[:, None] * D + cols[None, :]
        acc = gl.zeros([BLOCK_M, 64], gl.float32, layout)
        for i in range(0, count, 2):
            two = rmask & (i + 1 < count)
            l0 = gl.load(lse_ptr + (first + i) * R + rows, mask=rmask, other=float("-inf"), cache_modifier=".cg")
            l1 = gl.load(lse_ptr + (first + i + 1) * R + rows, mask=two, other=float("-inf"), cache_modifier=".cg")
            p0 = gl.load(part_ptr + (first + i) * R * D + at, mask=rmask[:, None], other=0.0, cache_modifier=".cg")
            p1 = gl.load(part_ptr + (first + i + 1) * R * D + at, mask=two[:, None], other=0.0, cache_modifier=".cg")
            acc += gl.exp2(l0 - top)[:, None] * p0.to(gl.float32) + gl.exp2(l1 - top)[:, None] * p1.to(gl.float32)
        gl.store(o_ptr + seq * R * D + at, (acc * inv[:, None]).to(o_ptr.dtype.element_ty), mask=rmask[:, None])


@gluon.jit
def _take_p0(bars, x_s, ph, acc, p0_s, v0, row_l: gl.constexpr, orow_l: gl.constexpr, IS_ASYNC: gl.constexpr):  # type: ignore[no-untyped-def]
    """Warpgroup 1, once warpgroup 0 published: its running maximum m0 and factor a0, and this half's output rescaled
    and P0.V0 of this half issued (P0 from shared memory)."""
    mbarrier.wait(bars.index(P0_READY), ph)
    m0 = _row(x_s, X_M0).load(row_l)
    a0 = _row(x_s, X_A0).load(row_l)
    acc = acc * gl.convert_layout(a0, orow_l)[:, None]
    acc = warpgroup_mma(p0_s, v0, acc, is_async=IS_ASYNC)
    return m0, a0, acc


@gluon.jit
def _v11_half(W: gl.constexpr, o_ptr, part_ptr, lse_ptr, q_s, qpe_s, kv_s, kpe_s, x_s, bars, scale, s, L, c0, n,  # type: ignore[no-untyped-def]
              seq, pid, slot, R, H: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
              STAGGER: gl.constexpr, EARLY_Y: gl.constexpr, MERGE: gl.constexpr, arrived_ptr, first, count,
              ROW_BLOCKS: gl.constexpr, PDL: gl.constexpr, COOP: gl.constexpr, MOST: gl.constexpr):  # fmt: skip
    """Warpgroup W: the score tiles of stage W (tiles 2i + W of the chunk) and the W-th half of the output's
    columns, over both stages' values."""
    D: gl.constexpr = kv_s.shape[2]
    DH: gl.constexpr = D // 2
    dtype: gl.constexpr = kv_s.dtype
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, BLOCK_N, 16])  # fmt: skip
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, DH, 16])  # fmt: skip
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    row_l: gl.constexpr = gl.SliceLayout(1, s_layout)
    orow_l: gl.constexpr = gl.SliceLayout(1, o_layout)

    rows = pid * BLOCK_M + gl.arange(0, BLOCK_M, layout=row_l)
    zero_s = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, s_layout)
    m = gl.full([BLOCK_M], float("-inf"), gl.float32, row_l)
    l_sum = gl.zeros([BLOCK_M], gl.float32, row_l)  # this warpgroup's tiles' probabilities, on the running maximum
    acc = gl.zeros([BLOCK_M, DH], gl.float32, o_layout)
    q_x = q_s.slice(0, DH, dim=1)
    q_y = q_s.slice(DH, DH, dim=1)
    k_x = kv_s.index(W).slice(0, DH, dim=1).permute((1, 0))  # this warpgroup's stage, for its scores
    k_y = kv_s.index(W).slice(DH, DH, dim=1).permute((1, 0))
    v0 = kv_s.index(0).slice(W * DH, DH, dim=1)  # this warpgroup's half of each stage's values
    v1 = kv_s.index(1).slice(W * DH, DH, dim=1)
    mbarrier.wait(bars.index(Q_FULL), 0)
    for i in range(0, (n + 1) // 2):
        ph = i & 1
        if W == 0:
            mbarrier.wait(bars.index(FULL_X), ph)
            mbarrier.wait(bars.index(FULL_Y), ph)
            sc = warpgroup_mma(q_s, kv_s.index(0).permute((1, 0)), zero_s, use_acc=False, is_async=True)
            sc = warpgroup_mma(qpe_s, kpe_s.index(0).permute((1, 0)), sc, is_async=True)
            sc = warpgroup_mma_wait(num_outstanding=0, deps=(sc,))
            if STAGGER:  # the second warpgroup's scores run while this one's softmax does
                mbarrier.arrive(bars.index(S0_DONE))
            m, a0, prob = _softmax(sc, rows, c0 + 2 * i * BLOCK_N, m, scale, s, L, H, BLOCK_N)
            l_sum = l_sum * a0 + gl.sum(prob, axis=1)
            p = prob.to(dtype)
            _publish_half(kpe_s.index(0), x_s, bars, p, m, a0, X_M0, P0_READY)
            acc = acc * gl.convert_layout(a0, orow_l)[:, None]
            acc = warpgroup_mma(gl.convert_layout(p, p_layout), v0, acc, is_async=True)
            # the second warpgroup's tile (none past an odd chunk's end): its factor, then P1.V1 of this half
            has1 = 2 * i + 1 < n
            mbarrier.wait(bars.index(P1_READY), ph, pred=has1)
            m = gl.where(has1, _row(x_s, X_M1).load(row_l), m)
            a1 = gl.where(has1, _row(x_s, X_A1).load(row_l), 1.0)
            acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
            mbarrier.arrive(bars.index(EMPTY_X))
            l_sum = l_sum * a1
            acc = acc * gl.convert_layout(a1, orow_l)[:, None]
            if has1:
                acc = warpgroup_mma(kpe_s.index(1), v1, acc)
            mbarrier.arrive(bars.index(EMPTY_X + 1), pred=has1)
        else:
            if 2 * i + 1 < n:
                if STAGGER:
                    mbarrier.wait(bars.index(S0_DONE), ph)
                mbarrier.wait(bars.index(FULL_X + 1), ph)
                sc = warpgroup_mma(q_x, k_x, zero_s, use_acc=False, is_async=True)
                sc = warpgroup_mma(qpe_s, kpe_s.index(1).permute((1, 0)), sc, is_async=True)
                if EARLY_Y:  # P0.V0 of this half issued before waiting for the rest of this tile: stage 0's second
                    # piece is released whether or not this tile's has landed
                    m0, a0, acc = _take_p0(bars, x_s, ph, acc, kpe_s.index(0), v0, row_l, orow_l, True)
                    mbarrier.wait(bars.index(FULL_Y + 1), ph)
                    sc = warpgroup_mma(q_y, k_y, sc, is_async=True)
                    acc = warpgroup_mma_wait(num_outstanding=1, deps=(acc,))
                    mbarrier.arrive(bars.index(EMPTY_Y))
                    sc = warpgroup_mma_wait(num_outstanding=0, deps=(sc,))
                else:
                    mbarrier.wait(bars.index(FULL_Y + 1), ph)
                    sc = warpgroup_mma(q_y, k_y, sc, is_async=True)
                    m0, a0, acc = _take_p0(bars, x_s, ph, acc, kpe_s.index(0), v0, row_l, orow_l, True)
                    sc = warpgroup_mma_wait(num_outstanding=1, deps=(sc,))
                m, a1, prob = _softmax(sc, rows, c0 + (2 * i + 1) * BLOCK_N, m0, scale, s, L, H, BLOCK_N)
                l_sum = (l_sum * a0) * a1 + gl.sum(prob, axis=1)
                p = prob.to(dtype)
                _publish_half(kpe_s.index(1), x_s, bars, p, m, a1, X_M1, P1_READY)
                if not EARLY_Y:
                    acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
                    mbarrier.arrive(bars.index(EMPTY_Y))
                acc = acc * gl.convert_layout(a1, orow_l)[:, None]
                acc = warpgroup_mma(gl.convert_layout(p, p_layout), v1, acc)
                mbarrier.arrive(bars.index(EMPTY_Y + 1))
            else:  # the chunk's last tile is the first warpgroup's: only P0.V0 of this half
                m, a0, acc = _take_p0(bars, x_s, ph, acc, kpe_s.index(0), v0, row_l, orow_l, False)
                l_sum = l_sum * a0
                mbarrier.arrive(bars.index(EMPTY_Y))

    if PDL and W == 0:  # v13: the combine's grid may be launched (it waits for this grid's stores to be done)
        gl.inline_asm_elementwise("griddepcontrol.launch_dependents; // $0", "=r", [], dtype=gl.int32, is_pure=False,
                                  pack=1)  # fmt: skip
    # the row sums: each warpgroup's own, then both
    _row(x_s, X_L + W).store(l_sum)
    mbarrier.arrive(bars.index(L_READY + W))
    mbarrier.wait(bars.index(L_READY + 1 - W), 0)
    l_sum = gl.convert_layout(l_sum + _row(x_s, X_L + 1 - W).load(row_l), orow_l)
    seen = l_sum > 0  # a row of a later token can see nothing of a chunk past its limit (s > 1)
    out = acc / gl.where(seen, l_sum, 1.0)[:, None]
    o_rows = pid * BLOCK_M + gl.arange(0, BLOCK_M, layout=orow_l)
    dd = W * DH + gl.arange(0, DH, layout=gl.SliceLayout(0, o_layout))
    if slot < 0:
        gl.store(o_ptr + (seq * R + o_rows[:, None]) * D + dd[None, :], out.to(o_ptr.dtype.element_ty),
                 mask=o_rows[:, None] < R)  # fmt: skip
    else:
        gl.store(part_ptr + (slot * R + o_rows[:, None]) * D + dd[None, :], out.to(part_ptr.dtype.element_ty),
                 mask=o_rows[:, None] < R)  # fmt: skip
        if W == 0:
            m_o = gl.convert_layout(m, orow_l)
            lse = gl.where(seen, m_o + gl.log2(gl.where(seen, l_sum, 1.0)), float("-inf"))
            gl.store(lse_ptr + slot * R + o_rows, lse, mask=o_rows < R)
        if MERGE:  # v12 (two chunks), v15 (MERGE): the last chunk of this row block to arrive merges them all
            _cta_barrier()  # this warpgroup's stores done (a barrier of its own partition)
            if W == 1:
                mbarrier.arrive(bars.index(STORED))
            elif COOP:  # v17: the chunks merge the row block together
                mbarrier.wait(bars.index(STORED), 0)
                _cooperate(part_ptr, lse_ptr, o_ptr, arrived_ptr, seq, pid, slot, first, count, R, D, BLOCK_M,
                           ROW_BLOCKS, MOST, 4)  # fmt: skip
            else:
                mbarrier.wait(bars.index(STORED), 0)  # and warpgroup 1's: the whole partial before the release
                if _last_to_arrive(arrived_ptr, seq, pid, count, ROW_BLOCKS):
                    if MERGE == 2:
                        _merge_pair(part_ptr, lse_ptr, o_ptr, seq, pid, first, R, D, BLOCK_M, 4)
                    else:  # v15: up to MERGE chunks
                        _merge_loop(part_ptr, lse_ptr, o_ptr, seq, pid, first, count, R, D, BLOCK_M, 4)


@gluon.jit
def mla_v11_kernel(q_desc, qpe_desc, kv_desc, kpe_desc, o_ptr, part_ptr, lse_ptr, meta_ptr, work_ptr, lens_ptr,  # type: ignore[no-untyped-def]
                   table_ptr, scale, s, t, R, MAX_PAGES, H: gl.constexpr, BLOCK_M: gl.constexpr,
                   BLOCK_N: gl.constexpr, PAGE: gl.constexpr, REGS: gl.constexpr, STAGGER: gl.constexpr,
                   EARLY_Y: gl.constexpr, num_warps: gl.constexpr, MERGE: gl.constexpr = False,
                   arrived_ptr=None, ROW_BLOCKS: gl.constexpr = 1, PDL: gl.constexpr = False,
                   COOP: gl.constexpr = False, MOST: gl.constexpr = 1):  # fmt: skip
    """One work item (a chunk of one sequence's tiles) for one 64-row block, on the seesaw schedule (``kv_desc``:
    half of a tile's value columns)."""
    D: gl.constexpr = 2 * kv_desc.block_type.shape[1]
    P: gl.constexpr = kpe_desc.block_type.shape[1]
    gl.static_assert(num_warps == 4, "the default partition is the first warpgroup")
    gl.static_assert(P == BLOCK_N, "the probabilities are published over a tile's rotary columns")
    pid, seq, j0, n, slot, first, count, L, row0 = _work_item(work_ptr, meta_ptr, lens_ptr, R, BLOCK_M)
    q_s, qpe_s, kv_s, kpe_s = _operands(q_desc, qpe_desc, kv_desc, kpe_desc, D, BLOCK_M, BLOCK_N)
    x_s = gl.allocate_shared_memory(gl.float32, [8 * BLOCK_M], gl.SwizzledSharedLayout(1, 1, 1, order=[0]))
    bars = gl.allocate_shared_memory(gl.int64, [BARRIERS, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(BARRIERS):  # each: one arrival (or the loader's expect)
        mbarrier.init(bars.index(i), count=1)
    fence_async_shared()
    c0 = j0 * BLOCK_N
    gl.warp_specialize(  # the tuples written out: a tuple kept in a variable turns its constexprs into tensors
        [
            (_v11_half, (0, o_ptr, part_ptr, lse_ptr, q_s, qpe_s, kv_s, kpe_s, x_s, bars, scale, s, L, c0, n, seq, pid,
                         slot, R, H, BLOCK_M, BLOCK_N, STAGGER, EARLY_Y, MERGE, arrived_ptr, first, count, ROW_BLOCKS,
                         PDL, COOP, MOST)),
            (_v11_half, (1, o_ptr, part_ptr, lse_ptr, q_s, qpe_s, kv_s, kpe_s, x_s, bars, scale, s, L, c0, n, seq, pid,
                         slot, R, H, BLOCK_M, BLOCK_N, STAGGER, EARLY_Y, MERGE, arrived_ptr, first, count, ROW_BLOCKS,
                         PDL, COOP, MOST)),
            (_v11_loader, (q_desc, qpe_desc, kv_desc, kpe_desc, q_s, qpe_s, kv_s, kpe_s, bars, table_ptr, seq, j0, n, t,
                           row0, MAX_PAGES, PAGE, BLOCK_N)),
        ],
        [4, 1],
        [REGS, 24],
    )  # fmt: skip


class MlaDecodeSeesaw(MlaDecodeServe):
    """v9's work items (split-KV, ragged, paged, the combine) with each CTA on the seesaw schedule."""

    TILE: ClassVar[Config] = {
        "BLOCK_M": 64,
        "BLOCK_N": 64,
        "num_warps": 4,
        "REGS": 232,
        "STAGGER": True,
        "EARLY_Y": True,
    }
    # v9's check (ragged, paged, split) with DeepSeek's 64 rotary columns
    check_params: ClassVar[dict[str, Any]] = {**MlaDecodeServe.check_params, "p": 64}
    KERNEL: ClassVar[str] = "mla_v11_kernel"
    GLUON_NEEDS: ClassVar[str] = (
        "16-bit types, d a multiple of 16 up to 512, p=64: the probabilities take a tile's rotary columns"
    )

    def gluon(self) -> bool:
        """v9's condition, with the rotary width one 64-row tile wide: the probabilities take its place."""
        return super().gluon() and self.p == self.TILE["BLOCK_N"]

    def tiles_tuned(self) -> list[Config]:
        """The schedule's variants that won somewhere on the H100 (scripts/mla-decode-seesaw.py): staggered scores
        with P0.V0_R after them (b=32 s=16 h=16), staggered with P0.V0_R first (h=128 b=32, cut in two), neither
        (h=128 b=64, small batches); the fourth won nowhere."""
        won = ((True, False), (True, True), (False, False))
        return [{**self.TILE, "STAGGER": stagger, "EARLY_Y": early} for stagger, early in won]

    def attention_kernel(self) -> Any:
        return mla_v11_kernel

    def tiles(self, ws: Any, block_n: int) -> tuple[Any, Any]:
        """The cache's descriptors: half of a tile's value columns (each piece's), and its rotary columns."""
        kv = ws.kv.view(-1, self.d + self.p)
        return self.descriptor(kv, [block_n, self.d // 2]), self.descriptor(kv, [block_n, self.p])


PLAN = MlaDecodeSeesaw
