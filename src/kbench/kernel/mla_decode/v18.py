"""mla_decode v18: v17 where a sequence has at most 16 query rows (s * h <= 16: decode at h=16, the memory-bound
rows), with the product transposed: the cache tile's 64 rows are the wgmma's M and the query rows its N.

v11-v17 put a sequence's query rows in a 64-row wgmma tile. At s=1 h=16 three quarters of each tile's rows are
padding: the kernel executes 4.03x the model's FLOPs (v17 at b=32 s=1 t=4096: 66.94 us under ncu, about what it
takes at s=4 with 64 real rows) and the two warpgroups' seesaw waits on that padded compute. Here one warpgroup
computes per cache tile S^T = K Q^T (m64n16: the tile's latent columns as a K-major A, Q through a permuted view as
B, then the rotary columns), the softmax over the cache rows (axis 0), P stored query rows by cache rows (K-major) and
O^T += V^T P^T (the tile's shared memory through a permuted view: an MN-major A; P through a permuted view as B):
2.2 MFLOP a tile instead of 8.9. A probe of one tile on the H100 (docs/kernels/mla_decode.md) found P stored the
other way ([64, 16], an MN-major B) gave wrong products under Triton 3.6. Two stages of cache tiles in flight, the
next refilled as soon as a tile's product is done; v9's work items, partials and log-sum-exps, v16's combine, v12's
merge of two chunks in the kernel. Elsewhere (more than 16 rows) v18 is v17.

Measured on the H100 (2026-11-28, docs/kernels/mla_decode.md; one benchmark run against v16): b=32 s=1 h=16 at
t=1024 / 4096 / 8192 in 20.77 / 57.54 / 106.48 us against 24.98 / 61.02 / 110.40, 63.6 / 89.9 / 96.7% of that run's
copy ceiling (2942 GB/s). 128 registers, no spills under Triton 3.6's ptxas."""

from __future__ import annotations

from typing import Any, ClassVar

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import fence_async_shared, mbarrier, warpgroup_mma

from kbench.plan.base import Config

from .v7 import _cta_barrier, _load_tile
from .v9 import BLOCK_N, MlaDecodeServe, _item_prologue, _last_to_arrive, _merge_chunks, _tile_row, _work_item
from .v17 import MlaDecodeSeesawCooperative

QUERIES = 16  # the wgmma's N: a sequence's query rows (s * h) at most


@gluon.jit
def mla_v18_kernel(q_desc, qpe_desc, kv_desc, kpe_desc, o_ptr, part_ptr, lse_ptr, meta_ptr, work_ptr, lens_ptr,  # type: ignore[no-untyped-def]
                   table_ptr, scale, s, t, R, MAX_PAGES, H: gl.constexpr, BLOCK_M: gl.constexpr,
                   BLOCK_N: gl.constexpr, PAGE: gl.constexpr, num_warps: gl.constexpr, MERGE: gl.constexpr = False,
                   arrived_ptr=None, ROW_BLOCKS: gl.constexpr = 1):  # fmt: skip
    """One work item (the tiles [j0, j0 + n) of one sequence) for its BLOCK_M query rows, the product transposed:
    per tile S^T [BLOCK_N, BLOCK_M] and O^T [D, BLOCK_M] += V^T P^T, one warpgroup."""
    LOG2E: gl.constexpr = 1.4426950408889634
    D: gl.constexpr = kv_desc.block_type.shape[1]
    dtype: gl.constexpr = kv_desc.dtype
    gl.static_assert(num_warps == 4, "one warpgroup")
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, BLOCK_M, 16])  # fmt: skip
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, BLOCK_M, 16])  # fmt: skip
    q_l: gl.constexpr = gl.SliceLayout(0, s_layout)  # one value per query row (a column of S^T)
    oq_l: gl.constexpr = gl.SliceLayout(0, o_layout)

    pid, seq, j0, n, slot, first, count, L, row0 = _work_item(work_ptr, meta_ptr, lens_ptr, R, BLOCK_M)
    # P is query rows x cache rows: K-major for the product's B
    q_s, qpe_s, kv_s, kpe_s, p_s, bars = _item_prologue(q_desc, qpe_desc, kv_desc, kpe_desc, table_ptr, seq, j0, n, t,
                                                        row0, MAX_PAGES, PAGE, BLOCK_M, BLOCK_N)  # fmt: skip

    rows = pid * BLOCK_M + gl.arange(0, BLOCK_M, layout=q_l)
    zero_s = gl.zeros([BLOCK_N, BLOCK_M], gl.float32, s_layout)
    m = gl.full([BLOCK_M], float("-inf"), gl.float32, q_l)
    l_sum = gl.zeros([BLOCK_M], gl.float32, q_l)
    acc = gl.zeros([D, BLOCK_M], gl.float32, o_layout)
    mbarrier.wait(bars.index(0), 0)
    for j in range(0, n):
        cur = j % 2
        mbarrier.wait(bars.index(1 + cur), (j // 2) & 1)
        st = warpgroup_mma(kv_s.index(cur), q_s.permute((1, 0)), zero_s, use_acc=False)
        st = warpgroup_mma(kpe_s.index(cur), qpe_s.permute((1, 0)), st)
        cols = (j0 + j) * BLOCK_N + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, s_layout))  # cache positions
        seen = (cols[:, None] <= L - s + rows[None, :] // H) & (cols[:, None] < L)
        st = gl.where(seen, st * (scale * LOG2E), float("-inf"))
        m_new = gl.maximum(m, gl.max(st, axis=0))
        m_safe = gl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = gl.exp2(m - m_safe)
        prob = gl.exp2(st - m_safe[None, :])
        l_sum = l_sum * alpha + gl.sum(prob, axis=0)
        m = m_new
        p_s.store(gl.permute(prob.to(dtype), (1, 0)))
        fence_async_shared()
        _cta_barrier()  # every warp's probabilities stored before the tensor cores read them
        acc = acc * gl.convert_layout(alpha, oq_l)[None, :]
        acc = warpgroup_mma(kv_s.index(cur).permute((1, 0)), p_s.permute((1, 0)), acc)  # O^T += V^T P^T
        _cta_barrier()  # the tile's product done by every warp: its stage and P may be overwritten
        r = _tile_row(table_ptr, seq, j0 + j + 2, t, MAX_PAGES, PAGE, BLOCK_N, j + 2 < n)
        _load_tile(kv_desc, kpe_desc, bars.index(1 + cur), kv_s.index(cur), kpe_s.index(cur), r, j + 2 < n)
    for i in gl.static_range(3):
        mbarrier.invalidate(bars.index(i))

    l_o = gl.convert_layout(l_sum, oq_l)
    seen_q = l_o > 0  # a row of a later token can see nothing of a chunk past its limit (s > 1)
    out = acc / gl.where(seen_q, l_o, 1.0)[None, :]
    o_rows = pid * BLOCK_M + gl.arange(0, BLOCK_M, layout=oq_l)
    dd = gl.arange(0, D, layout=gl.SliceLayout(1, o_layout))
    if slot < 0:
        gl.store(o_ptr + (seq * R + o_rows[None, :]) * D + dd[:, None], out.to(o_ptr.dtype.element_ty),
                 mask=o_rows[None, :] < R)  # fmt: skip
    else:
        gl.store(part_ptr + (slot * R + o_rows[None, :]) * D + dd[:, None], out, mask=o_rows[None, :] < R)
        m_o = gl.convert_layout(m, oq_l)
        lse = gl.where(seen_q, m_o + gl.log2(gl.where(seen_q, l_o, 1.0)), float("-inf"))
        gl.store(lse_ptr + slot * R + o_rows, lse, mask=o_rows < R)
        if MERGE:  # v12's merge (a sequence cut in two): the last chunk of the row block to arrive merges both
            _cta_barrier()  # every thread's partial stored before the release below
            if _last_to_arrive(arrived_ptr, seq, pid, count, ROW_BLOCKS):
                _merge_chunks(part_ptr, lse_ptr, o_ptr, seq, pid, first, count, R, D, BLOCK_M, num_warps)


class MlaDecodeTransposed(MlaDecodeSeesawCooperative):
    """v17, with the product transposed where a sequence has at most 16 query rows."""

    TRANSPOSED: ClassVar[Config] = {"BLOCK_M": QUERIES, "BLOCK_N": BLOCK_N, "num_warps": 4}

    def few_rows(self) -> bool:
        """Whether the transposed kernel serves: a sequence's query rows fit its N (16), and the latent width, its
        output's M, is whole 64-row wgmma tiles (d=32 is v17's)."""
        return self.rows <= QUERIES and self.d % 64 == 0 and self.gluon()

    def kernel_name(self) -> str:
        return "mla_v18_kernel" if self.few_rows() else super().kernel_name()

    def merge_bound(self) -> int:
        return 2 if self.few_rows() else super().merge_bound()  # v12's merge of two chunks where transposed

    def cooperative(self) -> bool:
        return not self.few_rows() and super().cooperative()

    def tiles_tuned(self) -> list[Config]:
        return [self.TRANSPOSED] if self.few_rows() else super().tiles_tuned()

    def row_blocks(self) -> int:
        return 1 if self.few_rows() else super().row_blocks()

    def attention_kernel(self) -> Any:
        return mla_v18_kernel if self.few_rows() else super().attention_kernel()

    def tiles(self, ws: Any, block_n: int) -> tuple[Any, Any]:
        """v9's descriptors (a tile's whole latent width, its rotary columns) where the product is transposed."""
        return MlaDecodeServe.tiles(self, ws, block_n) if self.few_rows() else super().tiles(ws, block_n)


PLAN = MlaDecodeTransposed
