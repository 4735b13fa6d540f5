"""mla_decode v14: v12 with the combine written in Gluon, where a sequence is cut into more chunks than the kernel
merges (small batches, MTP, the memory-bound rows). Followed: kbench's item 2 on v12 at b=4 s=16 h=16 (annotation,
the H100): "Stall on long_scoreboard in combine ... the line is shared-memory accesses (STS, LDS) with bank
conflicts", est. 8.1%, on v9's Triton combine (`acc += w[:, None] * part`: 80% of its stall samples, BAR.SYNC,
STS and LDS there: each chunk's weights, a row vector, converted through shared memory into the tile's layout before
the broadcast). Here the layouts are written out: the weights are loaded in the slice of the tile's own layout (no
conversion), the chunks' log-sum-exps read as one tile (their maximum and the weights' sum reduced along it, not a
chain of dependent loads per chunk), and two chunks' partials loaded per step, 16 bytes a thread.

Measured on the H100 (2026-11-28): nothing gained, kept as a measured step. ncu at b=4 s=16: the combine 10.56 us
against v12's 10.21; the benchmark's split rows within noise of v12 (35.7 against 36.0 us at b=4 s=16, 68.7 against
68.1 at MTP). The item had the wrong mechanism: the line's long-scoreboard stall is a wait on the partials' global
loads (the combine fills 24% of the warp slots: 512 CTAs of 4 warps, 0.32 waves), not on the conversion's shared
memory; kbench's stall items now name the loads a line waits on (docs/diagnosis.md)."""

from __future__ import annotations

from typing import Any, ClassVar

from triton.experimental import gluon
from triton.experimental.gluon import language as gl

from .v12 import MlaDecodeSeesawMerged


@gluon.jit
def mla_v14_combine_kernel(part_ptr, lse_ptr, meta_ptr, o_ptr, R, D: gl.constexpr, BLOCK_M: gl.constexpr,  # type: ignore[no-untyped-def]
                           BLOCK_D: gl.constexpr, num_warps: gl.constexpr):  # fmt: skip
    """A split sequence's chunks merged by their log-sum-exps: BLOCK_M rows x BLOCK_D columns of one sequence."""
    layout: gl.constexpr = gl.BlockedLayout([1, 4], [32 * 4 // BLOCK_D, BLOCK_D // 4], [num_warps, 1], [1, 0])
    row_l: gl.constexpr = gl.SliceLayout(1, layout)
    col_l: gl.constexpr = gl.SliceLayout(0, layout)
    b = gl.program_id(2)
    first = gl.load(meta_ptr + 2 * b)
    count = gl.load(meta_ptr + 2 * b + 1)
    if count > 1:
        rows = gl.program_id(0) * BLOCK_M + gl.arange(0, BLOCK_M, layout=row_l)
        rmask = rows < R
        cols = gl.arange(0, BLOCK_D, layout=col_l)
        # the chunks' log-sum-exps as tiles (a column per chunk): their maximum, then the weights' sum
        top = gl.full([BLOCK_M], float("-inf"), gl.float32, row_l)
        for c0 in range(0, count, BLOCK_D):
            at = lse_ptr + (first + c0 + cols[None, :]) * R + rows[:, None]
            lse = gl.load(at, mask=rmask[:, None] & (c0 + cols[None, :] < count), other=float("-inf"))
            top = gl.maximum(top, gl.max(lse, axis=1))
        top = gl.where(top == float("-inf"), 0.0, top)
        weight = gl.zeros([BLOCK_M], gl.float32, row_l)
        for c0 in range(0, count, BLOCK_D):
            at = lse_ptr + (first + c0 + cols[None, :]) * R + rows[:, None]
            lse = gl.load(at, mask=rmask[:, None] & (c0 + cols[None, :] < count), other=float("-inf"))
            weight += gl.sum(gl.exp2(lse - top[:, None]), axis=1)
        inv = 1.0 / gl.where(weight > 0, weight, 1.0)
        dd = gl.program_id(1) * BLOCK_D + cols
        acc = gl.zeros([BLOCK_M, BLOCK_D], gl.float32, layout)
        for i in range(0, count, 2):  # two chunks a step: both loads in flight together
            two = rmask & (i + 1 < count)
            l0 = gl.load(lse_ptr + (first + i) * R + rows, mask=rmask, other=float("-inf"))
            l1 = gl.load(lse_ptr + (first + i + 1) * R + rows, mask=two, other=float("-inf"))
            p0 = gl.load(part_ptr + ((first + i) * R + rows[:, None]) * D + dd[None, :], mask=rmask[:, None], other=0.0)
            p1 = gl.load(part_ptr + ((first + i + 1) * R + rows[:, None]) * D + dd[None, :], mask=two[:, None],
                         other=0.0)  # fmt: skip
            acc += gl.exp2(l0 - top)[:, None] * p0 + gl.exp2(l1 - top)[:, None] * p1
        out = acc * inv[:, None]
        gl.store(o_ptr + (b * R + rows[:, None]) * D + dd[None, :], out.to(o_ptr.dtype.element_ty),
                 mask=rmask[:, None])  # fmt: skip


class MlaDecodeSeesawGluonCombine(MlaDecodeSeesawMerged):
    """v12 with its combine in Gluon: no layout conversion, the chunks' weights from one read of their
    log-sum-exps, two chunks' partials in flight per step."""

    COMBINE: ClassVar[str] = "mla_v14_combine_kernel"

    def combine_kernel(self) -> Any:
        return mla_v14_combine_kernel


PLAN = MlaDecodeSeesawGluonCombine
