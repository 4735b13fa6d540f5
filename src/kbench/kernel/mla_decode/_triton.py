"""Triton pieces the Triton MLA decode versions share. Rows are the s*h query rows of one sequence, token-major
(row r is token r // h, head r % h); a row of token i sees cache rows j <= t - s + i."""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def qk_block(q_nope_ptr, q_pe_ptr, kv_ptr, b, rows, cols, R, t, D: tl.constexpr, P: tl.constexpr,  # type: ignore[no-untyped-def]
             BLOCK_D: tl.constexpr):  # fmt: skip
    """scores[rows, cols] = q_nope[rows] . kv[cols, :D] + q_pe[rows] . kv[cols, D:], fp32, masked rows/cols 0."""
    rmask = rows < R
    cmask = cols < t
    acc = tl.zeros((rows.shape[0], cols.shape[0]), dtype=tl.float32)
    for d0 in range(0, D, BLOCK_D):
        dd = d0 + tl.arange(0, BLOCK_D)
        q = tl.load(q_nope_ptr + (b * R + rows[:, None]) * D + dd[None, :], mask=rmask[:, None], other=0.0)
        k = tl.load(kv_ptr + (b * t + cols[None, :]) * (D + P) + dd[:, None], mask=cmask[None, :], other=0.0)
        acc += tl.dot(q, k)
    pp = tl.arange(0, P)
    qp = tl.load(q_pe_ptr + (b * R + rows[:, None]) * P + pp[None, :], mask=rmask[:, None], other=0.0)
    kp = tl.load(kv_ptr + (b * t + cols[None, :]) * (D + P) + D + pp[:, None], mask=cmask[None, :], other=0.0)
    return acc + tl.dot(qp, kp)


@triton.jit
def visible(rows, cols, s, t, H: tl.constexpr):  # type: ignore[no-untyped-def]
    """Whether each row's token may see each cache row (causal among the last s positions)."""
    return (cols[None, :] <= t - s + rows[:, None] // H) & (cols[None, :] < t)


@triton.jit
def queries(q_nope_ptr, q_pe_ptr, b, rows, R, D: tl.constexpr, P: tl.constexpr):  # type: ignore[no-untyped-def]
    """The rows' queries of sequence b: q_nope [rows, D] and q_pe [rows, P] (rows past R read as zeros)."""
    rmask = rows < R
    dd = tl.arange(0, D)
    pp = tl.arange(0, P)
    qn = tl.load(q_nope_ptr + (b * R + rows[:, None]) * D + dd[None, :], mask=rmask[:, None], other=0.0)
    qp = tl.load(q_pe_ptr + (b * R + rows[:, None]) * P + pp[None, :], mask=rmask[:, None], other=0.0)
    return qn, qp


@triton.jit
def softmax_step(sc, m, total):  # type: ignore[no-untyped-def]
    """One tile of the online softmax in the base-2 domain: the new running maximum, the factor that rescales what
    came before, the tile's unnormalised probabilities and the new running sum (a row that has seen nothing yet, its
    maximum still -inf, stays empty)."""
    m_new = tl.maximum(m, tl.max(sc, axis=1))
    m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
    alpha = tl.exp2(m - m_safe)
    prob = tl.exp2(sc - m_safe[:, None])
    return m_new, alpha, prob, total * alpha + tl.sum(prob, axis=1)


@triton.jit
def attend(q_nope_ptr, q_pe_ptr, kv_ptr, b, rows, start, stop, scale, s, t, R, H: tl.constexpr,  # type: ignore[no-untyped-def]
           D: tl.constexpr, P: tl.constexpr, BLOCK_N: tl.constexpr):  # fmt: skip
    """Online softmax attention of ``rows`` over cache rows [start, stop): the unnormalised output [rows, D]
    (fp32), the running maximum m and the running sum of exp, both in the base-2 domain (scores times
    scale * log2(e), so exp2 does the exponentials). The queries are loaded once; each cache tile [BLOCK_N, D + P]
    is read once and used twice: its D columns as keys and again as values."""
    LOG2E: tl.constexpr = 1.4426950408889634
    dd = tl.arange(0, D)
    pp = tl.arange(0, P)
    qn, qp = queries(q_nope_ptr, q_pe_ptr, b, rows, R, D, P)
    m = tl.full((rows.shape[0],), float("-inf"), tl.float32)
    total = tl.zeros((rows.shape[0],), tl.float32)
    acc = tl.zeros((rows.shape[0], D), tl.float32)
    for c0 in range(start, stop, BLOCK_N):
        cols = c0 + tl.arange(0, BLOCK_N)
        cmask = cols < stop
        tile = kv_ptr + (b * t + cols[:, None]) * (D + P)
        v = tl.load(tile + dd[None, :], mask=cmask[:, None], other=0.0)  # [BLOCK_N, D]: keys, then values
        kp = tl.load(tile + D + pp[None, :], mask=cmask[:, None], other=0.0)  # [BLOCK_N, P]
        sc = (tl.dot(qn, tl.trans(v)) + tl.dot(qp, tl.trans(kp))) * (scale * LOG2E)
        sc = tl.where(visible(rows, cols, s, t, H) & cmask[None, :], sc, float("-inf"))
        m, alpha, prob, total = softmax_step(sc, m, total)
        acc = acc * alpha[:, None] + tl.dot(prob.to(v.dtype), v)
    return acc, m, total
