"""mla_decode v17's merge in the attention kernel: a split row block's chunks, all resident at once (the grid launched
cooperatively), merge it together once the last has arrived, each its own slices of the output's columns. Called by
v11's kernel (``COOP``) after both warpgroups stored their halves of the chunk's partial."""

from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl

SLICE = gl.constexpr(32)  # v17: the columns of one slice of a cooperative merge


@gluon.jit
def _coop_weights(lse_ptr, first, count, R, rows, rmask, BLOCK_M: gl.constexpr, MOST: gl.constexpr,  # type: ignore[no-untyped-def]
                  row_l: gl.constexpr):  # fmt: skip
    """The largest of a row block's chunks' log-sum-exps (0 where none saw anything) and the reciprocal of their
    weights' sum: up to MOST chunks, every load of a pass issued before any is used (read past L1)."""
    top = gl.full([BLOCK_M], float("-inf"), gl.float32, row_l)
    for c in gl.static_range(MOST):
        at = lse_ptr + (first + c) * R + rows
        top = gl.maximum(top, gl.load(at, mask=rmask & (c < count), other=float("-inf"), cache_modifier=".cg"))
    top = gl.where(top == float("-inf"), 0.0, top)
    weight = gl.zeros([BLOCK_M], gl.float32, row_l)
    for c in gl.static_range(MOST):
        at = lse_ptr + (first + c) * R + rows
        weight += gl.exp2(gl.load(at, mask=rmask & (c < count), other=float("-inf"), cache_modifier=".cg") - top)
    return top, 1.0 / gl.where(weight > 0, weight, 1.0)


@gluon.jit
def _merge_slice(part_ptr, lse_ptr, o_ptr, seq, first, count, R, rows, rmask, top, inv, c0, D: gl.constexpr,  # type: ignore[no-untyped-def]
                 BLOCK_M: gl.constexpr, MOST: gl.constexpr, layout: gl.constexpr):  # fmt: skip
    """SLICE columns from ``c0`` of one row block: its chunks' partials (up to MOST, their loads issued together)
    merged by their log-sum-exps into the output."""
    cols = c0 + gl.arange(0, SLICE, layout=gl.SliceLayout(0, layout))
    at = rows[:, None] * D + cols[None, :]
    inside = rmask[:, None] & (cols[None, :] < D)  # the last slice of a d that is not a multiple of SLICE
    acc = gl.zeros([BLOCK_M, SLICE], gl.float32, layout)
    for c in gl.static_range(MOST):
        seen = rmask & (c < count)
        w = gl.exp2(
            gl.load(lse_ptr + (first + c) * R + rows, mask=seen, other=float("-inf"), cache_modifier=".cg") - top
        )
        at_c = part_ptr + (first + c) * R * D + at
        part = gl.load(at_c, mask=inside & (c < count), other=0.0, cache_modifier=".cg")
        acc += w[:, None] * part.to(gl.float32)
    gl.store(o_ptr + seq * R * D + at, (acc * inv[:, None]).to(o_ptr.dtype.element_ty), mask=inside)


@gluon.jit
def _cooperate(part_ptr, lse_ptr, o_ptr, coop_ptr, seq, pid, slot, first, count, R,  # type: ignore[no-untyped-def]
               D: gl.constexpr, BLOCK_M: gl.constexpr, ROW_BLOCKS: gl.constexpr, MOST: gl.constexpr,
               num_warps: gl.constexpr):  # fmt: skip
    """v17: a split row block's chunks merge it together once all have arrived, each its own SLICE-column slices
    (slice i: chunk i mod count). A chunk reads the row block's generation, arrives (acq_rel: its partial released,
    the earlier chunks' acquired), and polls the generation until the last to arrive advances it (release: every
    partial it acquired). The grid is launched cooperatively (every CTA resident at once, or no launch), so the polls
    end. Only the arrivals are reset; the generations run on from launch to launch. ``coop_ptr``: each row block's
    arrivals and generation."""
    SLICES: gl.constexpr = (D + SLICE - 1) // SLICE
    arrived = coop_ptr + (seq * ROW_BLOCKS + pid) * 2
    gen = arrived + 1
    g0 = gl.atomic_add(gen, 0, sem="acquire", scope="gpu")
    now = g0
    if gl.atomic_add(arrived, 1, sem="acq_rel", scope="gpu") == count - 1:  # the last to arrive
        gl.atomic_xchg(arrived, 0, sem="relaxed", scope="gpu")  # ready for the next launch
        now = gl.atomic_add(gen, 1, sem="release", scope="gpu") + 1
    while now == g0:
        now = gl.atomic_add(gen, 0, sem="acquire", scope="gpu")
    layout: gl.constexpr = gl.BlockedLayout([1, 4], [32 * 4 // SLICE, SLICE // 4], [num_warps, 1], [1, 0])
    rows = pid * BLOCK_M + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, layout))
    rmask = rows < R
    top, inv = _coop_weights(lse_ptr, first, count, R, rows, rmask, BLOCK_M, MOST, gl.SliceLayout(1, layout))
    for sl in range(slot - first, SLICES, count):  # this chunk's slices
        _merge_slice(part_ptr, lse_ptr, o_ptr, seq, first, count, R, rows, rmask, top, inv, sl * SLICE, D, BLOCK_M,
                     MOST, layout)  # fmt: skip
