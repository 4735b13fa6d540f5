"""mla_decode v9: v7's Gluon kernel over work items, so that one kernel serves every batch: split-KV where b x row
blocks cannot fill the GPU (plain decode, 128 heads at s=1, small batches), a ragged batch (per-sequence lengths)
and a paged cache (a block table; blocks of a multiple of the 64-row tile, FlashMLA's and vLLM's 64 included).

A work item is (sequence, first tile, last tile + 1, slot): a chunk of one sequence's 64-row cache tiles, attended
by each of its row blocks (grid axis 0, launched together so that the chunk is read once into L2). A sequence cut
into several chunks writes each chunk's normalised output and base-2 log-sum-exp to its slot (fp32), and a Triton
combine kernel merges them; a sequence in one chunk writes its output directly. The cut is chosen on the host: each
sequence's tiles in n equal chunks for a chunk bound C, the items longest first (the block scheduler then places
them as longest-processing-time-first does), C from a model of the makespan that greedy placement gives on the SMs
(one CTA per SM: v7's 225 KB of shared memory) plus the combine's traffic; the nearest bounds are tuned too."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import triton
import triton.language as tl
from pydantic import model_validator
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    warpgroup_mma,
    warpgroup_mma_wait,
)
from triton.language.extra.cuda import gdc_wait

from kbench.plan.base import Config, Launch, Stage

from ._common import MlaDecode, ServingWorkspace
from ._work_items import Cut as Cut
from ._work_items import ranked_cuts
from .v3 import sm_count
from .v7 import MlaDecodeGluon, _cta_barrier, _load_tile, _publish, _scores, _softmax, _tma_load

BLOCK_N = 64  # cache rows per tile (v7's)
COMBINE = "mla_v9_combine_kernel"
COMBINE_TILE: Config = {"BLOCK_D": 64, "num_warps": 4}


@dataclass
class SplitServingWorkspace(ServingWorkspace):
    partial: Any  # [slots, s*h, d] fp32: each chunk's normalised output
    lse: Any  # [slots, s*h] fp32: each chunk's base-2 log-sum-exp (-inf where its rows saw nothing)
    meta: Any  # [b, 2] int32: each sequence's first slot and chunk count, written by the attention kernel
    arrived: Any  # [b, row blocks] int32: the chunks of each split row block done so far (v10's merge; zero between)
    coop: Any  # [b, row blocks, 2] int32 (v17): each row block's arrivals (zero between launches) and generation (its
    # merges so far)


@gluon.jit
def _tile_row(table_ptr, seq, j, t, MAX_PAGES, PAGE: gl.constexpr, BLOCK_N: gl.constexpr, pred):  # type: ignore[no-untyped-def]
    """The cache row where tile j of sequence ``seq`` starts: in its own [t, d + p] block, or in the block table's
    page (a tile past the sequence's pages reads page 0: its rows are masked)."""
    if PAGE == 0:
        row = seq * t + j * BLOCK_N
    else:
        pos = j * BLOCK_N
        blk = gl.load(table_ptr + seq * MAX_PAGES + pos // PAGE, mask=pred, other=0)
        row = blk * PAGE + pos % PAGE
    return row


@gluon.jit
def _work_item(work_ptr, meta_ptr, lens_ptr, R, BLOCK_M: gl.constexpr):  # type: ignore[no-untyped-def]
    """This CTA's row block and work item (grid axis 1): its sequence, first tile, tiles, slot (-1: written directly)
    and its sequence's first slot and chunk count; the sequence's length and the CTA's first query row (rows past the
    sequence's R read the next one's queries: never stored). A sequence's first chunk says where its chunks lie (the
    combine reads it)."""
    pid = gl.program_id(0)
    item = work_ptr + gl.program_id(1) * 6
    seq = gl.load(item)
    j0 = gl.load(item + 1)
    slot = gl.load(item + 3)
    first = gl.load(item + 4)
    count = gl.load(item + 5)
    if (pid == 0) & (slot == first):
        gl.store(meta_ptr + 2 * seq, slot)
        gl.store(meta_ptr + 2 * seq + 1, count)
    return pid, seq, j0, gl.load(item + 2) - j0, slot, first, count, gl.load(lens_ptr + seq), seq * R + pid * BLOCK_M


@gluon.jit
def _operands(q_desc, qpe_desc, kv_desc, kpe_desc, D: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr):  # type: ignore[no-untyped-def]
    """Shared memory for Q (its D latent and P rotary columns) and two stages of cache tiles, in the layouts their
    TMA copies land in."""
    P: gl.constexpr = kpe_desc.block_type.shape[1]
    dtype: gl.constexpr = kv_desc.dtype
    q_s = gl.allocate_shared_memory(dtype, [BLOCK_M, D], q_desc.layout)
    qpe_s = gl.allocate_shared_memory(dtype, [BLOCK_M, P], qpe_desc.layout)
    kv_s = gl.allocate_shared_memory(dtype, [2, BLOCK_N, D], kv_desc.layout)
    kpe_s = gl.allocate_shared_memory(dtype, [2, BLOCK_N, P], kpe_desc.layout)
    return q_s, qpe_s, kv_s, kpe_s


@gluon.jit
def _item_prologue(q_desc, qpe_desc, kv_desc, kpe_desc, table_ptr, seq, j0, n, t, row0, MAX_PAGES,  # type: ignore[no-untyped-def]
                   PAGE: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr):  # fmt: skip
    """A work item's shared memory (Q, two stages of cache tiles, the probabilities [BLOCK_M, BLOCK_N]) and its
    mbarriers (Q, stage 0, stage 1), with the copies of Q and of the chunk's tiles 0 and 1 issued."""
    D: gl.constexpr = kv_desc.block_type.shape[1]
    dtype: gl.constexpr = kv_desc.dtype
    q_s, qpe_s, kv_s, kpe_s = _operands(q_desc, qpe_desc, kv_desc, kpe_desc, D, BLOCK_M, BLOCK_N)
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
    for i in gl.static_range(2):  # the chunk's tiles 0 and 1
        r = _tile_row(table_ptr, seq, j0 + i, t, MAX_PAGES, PAGE, BLOCK_N, i < n)
        _load_tile(kv_desc, kpe_desc, bars.index(1 + i), kv_s.index(i), kpe_s.index(i), r, i < n)
    return q_s, qpe_s, kv_s, kpe_s, p_s, bars


@gluon.jit
def _last_to_arrive(arrived_ptr, seq, pid, count, ROW_BLOCKS: gl.constexpr):  # type: ignore[no-untyped-def]
    """A split row block's chunk, its partial stored, counts itself in at ``arrived_ptr`` (one counter per sequence
    and row block; acq_rel: its partial released, the earlier chunks' acquired). True for the last of the ``count``
    chunks to arrive, which sets the counter back to zero for the next launch (v10, v12, v15, v18)."""
    counter = arrived_ptr + seq * ROW_BLOCKS + pid
    last = gl.atomic_add(counter, 1, sem="acq_rel", scope="gpu") == count - 1
    if last:
        gl.store(counter, 0)
    return last


@gluon.jit
def _chunk_weights(lse_ptr, first, count, R, rows, rmask, BLOCK_M: gl.constexpr, row_l: gl.constexpr):  # type: ignore[no-untyped-def]
    """The largest of a row block's ``count`` chunks' log-sum-exps (0 where none saw anything) and the reciprocal of
    their weights' sum, each chunk's weight exp2(lse - top) (read past L1: other SMs wrote them)."""
    top = gl.full([BLOCK_M], float("-inf"), gl.float32, row_l)
    for i in range(count):
        lse = gl.load(lse_ptr + (first + i) * R + rows, mask=rmask, other=float("-inf"), cache_modifier=".cg")
        top = gl.maximum(top, lse)
    top = gl.where(top == float("-inf"), 0.0, top)
    weight = gl.zeros([BLOCK_M], gl.float32, row_l)
    for i in range(count):
        lse = gl.load(lse_ptr + (first + i) * R + rows, mask=rmask, other=float("-inf"), cache_modifier=".cg")
        weight += gl.exp2(lse - top)
    return top, 1.0 / gl.where(weight > 0, weight, 1.0)


@gluon.jit
def _merge_chunks(part_ptr, lse_ptr, o_ptr, seq, pid, first, count, R, D: gl.constexpr, BLOCK_M: gl.constexpr,  # type: ignore[no-untyped-def]
                  num_warps: gl.constexpr):  # fmt: skip
    """One row block of a split sequence: its ``count`` chunks' partials merged by their log-sum-exps into the
    output, 64 columns at a time (read past L1: other SMs wrote them)."""
    layout: gl.constexpr = gl.BlockedLayout([1, 4], [4, 8], [num_warps, 1], [1, 0])
    rows = pid * BLOCK_M + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, layout))
    rmask = rows < R
    top, inv = _chunk_weights(lse_ptr, first, count, R, rows, rmask, BLOCK_M, gl.SliceLayout(1, layout))
    for c0 in gl.static_range(0, D, 64):
        cols = c0 + gl.arange(0, 64, layout=gl.SliceLayout(0, layout))
        acc = gl.zeros([BLOCK_M, 64], gl.float32, layout)
        for i in range(count):
            lse = gl.load(lse_ptr + (first + i) * R + rows, mask=rmask, other=float("-inf"), cache_modifier=".cg")
            part = gl.load(part_ptr + ((first + i) * R + rows[:, None]) * D + cols[None, :], mask=rmask[:, None],
                           other=0.0, cache_modifier=".cg")  # fmt: skip
            acc += gl.exp2(lse - top)[:, None] * part
        gl.store(o_ptr + (seq * R + rows[:, None]) * D + cols[None, :], (acc * inv[:, None]).to(o_ptr.dtype.element_ty),
                 mask=rmask[:, None])  # fmt: skip


@gluon.jit
def mla_v9_kernel(q_desc, qpe_desc, kv_desc, kpe_desc, o_ptr, part_ptr, lse_ptr, meta_ptr, work_ptr, lens_ptr,  # type: ignore[no-untyped-def]
                  table_ptr, scale, s, t, R, MAX_PAGES, H: gl.constexpr, BLOCK_M: gl.constexpr,
                  BLOCK_N: gl.constexpr, PAGE: gl.constexpr, num_warps: gl.constexpr, MERGE: gl.constexpr = False,
                  arrived_ptr=None, ROW_BLOCKS: gl.constexpr = 1):  # fmt: skip
    """v7's loop (P.V of a tile issued before the next tile's Q.K^T) over the tiles [j0, j1) of one work item.
    ``MERGE`` (v10): a split sequence's chunk, its partial written, counts itself in at ``arrived_ptr`` (one counter
    per sequence and row block); the last of them to arrive merges them all into the output (no combine kernel)."""
    D: gl.constexpr = kv_desc.block_type.shape[1]
    gl.static_assert(num_warps == 8, "two warpgroups: one per half of the scores' columns and of the output's")
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 2],
                                                       instr_shape=[16, BLOCK_N // 2, 16])  # fmt: skip
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 2],
                                                       instr_shape=[16, D // 2, 16])  # fmt: skip
    o_rows_layout: gl.constexpr = gl.SliceLayout(1, o_layout)

    pid, seq, j0, n, slot, first, count, L, row0 = _work_item(work_ptr, meta_ptr, lens_ptr, R, BLOCK_M)
    q_s, qpe_s, kv_s, kpe_s, p_s, bars = _item_prologue(q_desc, qpe_desc, kv_desc, kpe_desc, table_ptr, seq, j0, n, t,
                                                        row0, MAX_PAGES, PAGE, BLOCK_M, BLOCK_N)  # fmt: skip

    rows = pid * BLOCK_M + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, s_layout))
    zero_s = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, s_layout)
    mbarrier.wait(bars.index(0), 0)
    mbarrier.wait(bars.index(1), 0)
    sc = _scores(q_s, qpe_s, kv_s.index(0), kpe_s.index(0), zero_s, False)
    m = gl.full([BLOCK_M], float("-inf"), gl.float32, gl.SliceLayout(1, s_layout))
    m, alpha, prob = _softmax(sc, rows, j0 * BLOCK_N, m, scale, s, L, H, BLOCK_N)
    total = prob  # the running sums, per element: summed over the columns once, at the end
    _publish(p_s, prob)
    acc = gl.zeros([BLOCK_M, D], gl.float32, o_layout)

    for j in range(0, n - 1):
        cur = j % 2
        nxt = 1 - cur
        acc = warpgroup_mma(p_s, kv_s.index(cur), acc, is_async=True)  # the values: the keys' D columns
        mbarrier.wait(bars.index(1 + nxt), ((j + 1) // 2) & 1)
        sc = _scores(q_s, qpe_s, kv_s.index(nxt), kpe_s.index(nxt), zero_s, True)
        acc = warpgroup_mma_wait(num_outstanding=2, deps=(acc,))
        _cta_barrier()  # both warpgroups' P.V of tile j done: its stage and P may be overwritten
        r = _tile_row(table_ptr, seq, j0 + j + 2, t, MAX_PAGES, PAGE, BLOCK_N, j + 2 < n)
        _load_tile(kv_desc, kpe_desc, bars.index(1 + cur), kv_s.index(cur), kpe_s.index(cur), r, j + 2 < n)
        sc = warpgroup_mma_wait(num_outstanding=0, deps=(sc,))
        m, alpha, prob = _softmax(sc, rows, (j0 + j + 1) * BLOCK_N, m, scale, s, L, H, BLOCK_N)
        total = total * alpha[:, None] + prob
        acc = acc * gl.convert_layout(alpha, o_rows_layout)[:, None]
        _publish(p_s, prob)

    acc = warpgroup_mma(p_s, kv_s.index((n - 1) % 2), acc)
    for i in gl.static_range(3):
        mbarrier.invalidate(bars.index(i))
    l_sum = gl.convert_layout(gl.sum(total, axis=1), o_rows_layout)
    seen = l_sum > 0  # a row of a later token can see nothing of a chunk past its limit (s > 1)
    out = acc / gl.where(seen, l_sum, 1.0)[:, None]
    o_rows = pid * BLOCK_M + gl.arange(0, BLOCK_M, layout=o_rows_layout)
    dd = gl.arange(0, D, layout=gl.SliceLayout(0, o_layout))
    if slot < 0:
        gl.store(o_ptr + (seq * R + o_rows[:, None]) * D + dd[None, :], out.to(o_ptr.dtype.element_ty),
                 mask=o_rows[:, None] < R)  # fmt: skip
    else:
        gl.store(part_ptr + (slot * R + o_rows[:, None]) * D + dd[None, :], out, mask=o_rows[:, None] < R)
        m_o = gl.convert_layout(m, o_rows_layout)
        lse = gl.where(seen, m_o + gl.log2(gl.where(seen, l_sum, 1.0)), float("-inf"))
        gl.store(lse_ptr + slot * R + o_rows, lse, mask=o_rows < R)
        if MERGE:
            _cta_barrier()  # every thread's partial stored before the release below
            if _last_to_arrive(arrived_ptr, seq, pid, count, ROW_BLOCKS):
                _merge_chunks(part_ptr, lse_ptr, o_ptr, seq, pid, first, count, R, D, BLOCK_M, num_warps)


@triton.jit
def mla_v9_combine_kernel(part_ptr, lse_ptr, meta_ptr, o_ptr, R, D: tl.constexpr, BLOCK_M: tl.constexpr,  # type: ignore[no-untyped-def]
                          BLOCK_D: tl.constexpr, PDL: tl.constexpr = False):  # fmt: skip
    """A split sequence's chunks merged by their log-sum-exps (a sequence in one chunk: its output is written).
    ``PDL`` (v13): launched as the attention kernel's programmatic dependent, it waits here for that grid's stores."""
    if PDL:
        gdc_wait()
    b, first, count, rows, dd, rmask = combine_block(meta_ptr, R, BLOCK_M, BLOCK_D)
    if count > 1:
        top = tl.full((BLOCK_M,), float("-inf"), tl.float32)
        for i in range(0, count):
            top = tl.maximum(top, tl.load(lse_ptr + (first + i) * R + rows, mask=rmask, other=float("-inf")))
        top = tl.where(top == float("-inf"), 0.0, top)
        acc = tl.zeros((BLOCK_M, BLOCK_D), tl.float32)
        weight = tl.zeros((BLOCK_M,), tl.float32)
        for i in range(0, count):
            w = tl.exp2(tl.load(lse_ptr + (first + i) * R + rows, mask=rmask, other=float("-inf")) - top)
            part = tl.load(part_ptr + ((first + i) * R + rows[:, None]) * D + dd[None, :], mask=rmask[:, None])
            part = part.to(tl.float32)  # v13's partials are in the output's type
            acc += w[:, None] * part
            weight += w
        out = acc / tl.where(weight > 0, weight, 1.0)[:, None]
        tl.store(o_ptr + (b * R + rows[:, None]) * D + dd[None, :], out.to(o_ptr.dtype.element_ty), mask=rmask[:, None])


class MlaDecodeServe(MlaDecodeGluon):
    """One Gluon kernel over work items (split-KV, ragged, paged) and, where a sequence is split, a combine."""

    SERVES: ClassVar[bool] = True
    PAGE_MULTIPLE: ClassVar[int] = BLOCK_N
    # ragged lengths, a paged cache and split sequences in the check: 3 sequences of 65..200 rows in pages of 64
    check_params: ClassVar[dict[str, Any]] = {**MlaDecodeGluon.check_params, "b": 3, "t": 200, "t_min": 65, "page": 64}
    TILE: ClassVar[Config] = {"BLOCK_M": 64, "BLOCK_N": BLOCK_N, "num_warps": 8}
    CANDIDATES: ClassVar[int] = 3  # chunk bounds tuned: the model's best and the next best of the same kind
    # v10: where no sequence is cut into more than MERGE chunks, the last chunk of a split row block merges them in
    # the kernel (no combine); 0: never
    MERGE: ClassVar[int] = 0
    # v17: the chunks of a split row block merge it together (each its share of the columns, once all have arrived),
    # where every CTA of the grid can be resident at once; else the combine
    COOP: ClassVar[bool] = False
    # v13: a split batch's attention and combine in one stage, the combine launched as the attention kernel's
    # programmatic dependent (PDL), and the partials in the output's type (a convex combination of the values' rows,
    # so within their range; fp32 before)
    CHAINED: ClassVar[bool] = False
    KERNEL: ClassVar[str] = "mla_v9_kernel"  # the attention kernel's name (v11: the seesaw schedule's)
    COMBINE: ClassVar[str] = COMBINE  # the combine's (v14: a Gluon one)
    COMBINE_TUNING: ClassVar[list[Config]] = [COMBINE_TILE]  # the combine's configurations (v16 tunes several)
    GLUON_NEEDS: ClassVar[str] = "16-bit types, d a multiple of 16 up to 512, p at least 16"  # what gluon() asks

    @model_validator(mode="after")
    def _served_by_gluon(self) -> MlaDecodeServe:
        if self.serving() and not self.gluon():
            raise ValueError(
                f"t_min={self.t_min}, page={self.page}, dtype={self.dtype}, d={self.d}, p={self.p}: ragged and paged "
                f"batches run on the Gluon kernel ({self.GLUON_NEEDS}); elsewhere v6's kernels run, on one contiguous "
                "cache (--t_min=0 --page=0)"
            )
        return self

    def gluon(self) -> bool:
        return super().gluon() and self.d % 16 == 0

    def cuts(self) -> list[Cut]:
        """The chunk bounds the model ranks best, each cutting the batch differently, all of one kind (all split or
        none: the stages differ)."""
        tiles = tuple(math.ceil(n / BLOCK_N) for n in self.lens())
        return ranked_cuts(tiles, self.row_blocks(), self.rows, self.d, sm_count())[: self.CANDIDATES]

    def stages(self) -> list[Stage]:
        if not self.gluon():
            return super().stages()
        cuts = self.cuts()
        merged = self.merged(cuts[0])
        if merged or self.CHAINED:  # tuned among the cuts merged the same way (in the kernel, or chained)
            cuts = [c for c in cuts if self.merged(c) == merged]
        tuning = [{**tile, "CHUNK": c.bound} for c in cuts for tile in self.tiles_tuned()]
        attention = self.attention_stage(self._attend, tuning, [self.kernel_name()])
        if not cuts[0].slots:
            return [attention]
        partial = cuts[0].slots * self.rows * (self.partial_bytes() * self.d + 4.0)  # and the log-sum-exps
        if merged or self.CHAINED:  # the partials written, then read back by each row block's last chunk (one
            # kernel) or by the combine chained to the attention kernel
            moved = attention.dram_bytes + 2 * partial
            name = self.kernel_name()
            build, kernels = (self._attend, [name]) if merged else (self._chain, [name, self.COMBINE])
            return [Stage(attention.name, flops=attention.flops, dram_bytes=moved, precision=self.precision,
                          build=build, tuning=tuning, kernels=kernels)]  # fmt: skip
        return [
            Stage("partial", flops=attention.flops, dram_bytes=attention.dram_bytes + partial,
                  precision=self.precision, build=self._attend, tuning=tuning, kernels=[self.kernel_name()]),
            Stage("combine", flops=3.0 * cuts[0].slots * self.rows * self.d, dram_bytes=partial + self.out_bytes(),
                  precision="fp32", build=self._merge, tuning=self.COMBINE_TUNING,
                  kernels=[self.COMBINE]),
        ]  # fmt: skip

    def partial_bytes(self) -> int:
        """Bytes of one element of a chunk's partial output: fp32, or the output's type (v13)."""
        return self.element_bytes() if self.CHAINED else 4

    def partial_dtype(self) -> Any:
        import torch

        return self.torch_dtype() if self.CHAINED else torch.float32

    def kernel_name(self) -> str:
        """The attention kernel's name (v18's where its product is transposed)."""
        return self.KERNEL

    def merge_bound(self) -> int:
        """The most chunks of a sequence the kernel merges itself (MERGE; v18: two where its product is transposed)."""
        return self.MERGE

    def cooperative(self) -> bool:
        """Whether the chunks of a split row block merge it together (COOP, v17; not v18's transposed kernel)."""
        return self.COOP

    def merged(self, cut: Cut) -> bool:
        """Whether the kernel merges ``cut``'s split sequences itself (v10, at most MERGE chunks to a sequence; v17,
        cooperatively: only where the grid is at most one CTA per SM, launched so that every CTA is resident at
        once)."""
        fits = not self.cooperative() or len(cut.items) * self.row_blocks() <= sm_count()
        return bool(cut.slots) and max(count for *_, count in cut.items) <= self.merge_bound() and fits

    def setup(self, device: str, seed: int) -> Any:
        import torch

        if not self.gluon():
            return super().setup(device, seed)
        ws = MlaDecode.setup(self, device, seed)  # not v3's split workspace: this one's partials are per slot
        if not isinstance(ws, ServingWorkspace):  # one contiguous cache: the kernel still reads the lengths
            ws = self.served(ws, device, seed)
        slots = max([c.slots for c in self.cuts()] + [1])
        return SplitServingWorkspace(
            **vars(ws),
            partial=torch.empty(slots, self.rows, self.d, device=device, dtype=self.partial_dtype()),
            lse=torch.empty(slots, self.rows, device=device, dtype=torch.float32),
            meta=torch.zeros(self.b, 2, device=device, dtype=torch.int32),
            arrived=torch.zeros(self.b, self.row_blocks(), device=device, dtype=torch.int32),
            coop=torch.zeros(self.b, self.row_blocks(), 2, device=device, dtype=torch.int32),
        )

    def tiles_tuned(self) -> list[Config]:
        """The kernel's configurations tuned at each cut (v11: its schedule's variants)."""
        return [self.TILE]

    def combine_kernel(self) -> Any:
        """The kernel merging a split sequence's chunks (v14 overrides it)."""
        return mla_v9_combine_kernel

    def attention_kernel(self) -> Any:
        """The Gluon kernel over work items (v11 overrides it with the seesaw schedule's)."""
        return mla_v9_kernel

    def row_blocks(self) -> int:
        return math.ceil(self.rows / self.TILE["BLOCK_M"])

    def tiles(self, ws: Any, block_n: int) -> tuple[Any, Any]:
        kv = ws.kv.view(-1, self.d + self.p)  # [b * t, d + p] or the pool's [pages * page, d + p]
        return self.descriptor(kv, [block_n, self.d]), self.descriptor(kv, [block_n, self.p])

    def _attend(self, ws: SplitServingWorkspace, cfg: Config) -> Launch:
        import torch

        cut = next(c for c in self.cuts() if c.bound == cfg["CHUNK"])
        work = torch.tensor(cut.items, dtype=torch.int32).to(ws.kv.device)
        m, bn, d, p = cfg["BLOCK_M"], cfg["BLOCK_N"], self.d, self.p
        q_desc = self.descriptor(ws.q_nope.view(self.b * self.rows, d), [m, d])
        qpe_desc = self.descriptor(ws.q_pe.view(self.b * self.rows, p), [m, p])
        kv_desc, kpe_desc = self.tiles(ws, bn)
        table = ws.table if ws.table is not None else ws.lens  # a contiguous cache reads no table
        grid = (triton.cdiv(self.rows, m), len(cut.items))
        kernel = self.attention_kernel()[grid]
        max_pages = int(table.shape[1]) if ws.table is not None else 0
        args = {"H": self.h, "PAGE": self.page, **{k: v for k, v in cfg.items() if k != "CHUNK"}}
        if self.merged(cut):
            args.update(MERGE=self.merge_bound(), arrived_ptr=ws.arrived, ROW_BLOCKS=self.row_blocks())
            if self.cooperative():  # MOST: the most chunks of a sequence (not the table's row stride, MAX_PAGES);
                # every CTA resident at once (a cooperative launch): a row block's chunks can wait for one another
                most = max(count for *_, count in cut.items)
                args.update(COOP=True, arrived_ptr=ws.coop, MOST=most, launch_cooperative_grid=True)
        elif self.CHAINED and cut.slots:
            args.update(PDL=True)  # the combine follows as its programmatic dependent
        bufs = (ws.out, ws.partial, ws.lse, ws.meta, work, ws.lens, table)
        shape = (self.scale, self.s, self.t, self.rows, max_pages)
        return Launch(lambda: kernel(q_desc, qpe_desc, kv_desc, kpe_desc, *bufs, *shape, **args), grid)

    def _merge(self, ws: SplitServingWorkspace, cfg: Config, pdl: bool = False) -> Launch:
        block_d = min(cfg["BLOCK_D"], self.d)
        grid = (triton.cdiv(self.rows, 16), self.d // block_d, self.b)
        kernel = self.combine_kernel()[grid]
        args: dict[str, Any] = {**cfg, "D": self.d, "BLOCK_M": 16, "BLOCK_D": block_d}  # v16's CHUNKS too
        if pdl:  # launched before the attention kernel ends; it waits for that grid's stores (griddepcontrol.wait)
            args.update(PDL=True, launch_pdl=True)
        return Launch(lambda: kernel(ws.partial, ws.lse, ws.meta, ws.out, self.rows, **args), grid)

    def _chain(self, ws: SplitServingWorkspace, cfg: Config) -> Launch:
        """v13's one stage: the attention kernel, then the combine as its programmatic dependent."""
        pdl = ws.partial.device.type == "cuda"  # Triton's interpreter has no grid dependency control
        attend, merge = self._attend(ws, cfg), self._merge(ws, COMBINE_TILE, pdl=pdl)
        return Launch(lambda: (attend.fn(), merge.fn()), attend.grid)


PLAN = MlaDecodeServe


@triton.jit
def combine_block(meta_ptr, R, BLOCK_M: tl.constexpr, BLOCK_D: tl.constexpr):  # type: ignore[no-untyped-def]
    """A combine program's block (grid: row blocks, column blocks, sequences): its sequence, the sequence's first
    slot and chunk count (the attention kernel wrote them), its rows, its columns and which rows lie in the
    sequence."""
    b = tl.program_id(2)
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    dd = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    return b, tl.load(meta_ptr + 2 * b), tl.load(meta_ptr + 2 * b + 1), rows, dd, rows < R
